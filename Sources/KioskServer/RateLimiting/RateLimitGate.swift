import Foundation
import KioskStore
import HTTPTypes
import Hummingbird

/// Where the store's routes ask whether a request is within its limits (``RateLimits``): account
/// creation per client address, purchases per client address and per account.
struct RateLimitGate: Sendable {
    let limits: RateLimits
    let limiter: RateLimiter

    /// Refuses (`rate_limited`) when the client's address created too many accounts lately.
    func admitAccountCreation(_ request: Request, context: KioskRequestContext) async throws {
        guard let limit = limits.accountsPerAddress, let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers) else { return }
        try await take("accounts:address:\(address)", limit, what: "too many accounts were created from \(address)")
    }

    /// Refuses (`rate_limited`) when the client's address or the account made too many purchases lately.
    func admitPurchase(_ request: Request, context: KioskRequestContext, accountId: String) async throws {
        if let limit = limits.purchasesPerAddress, let address = limits.clientAddress(peer: context.peerAddress, fields: request.headers) {
            try await take("purchases:address:\(address)", limit, what: "too many purchases came from \(address)")
        }
        if let limit = limits.purchasesPerAccount {
            try await take("purchases:account:\(accountId)", limit, what: "account \(accountId) made too many purchases")
        }
    }

    private func take(_ key: String, _ limit: RateLimit, what: String) async throws {
        guard case .limited(let seconds) = try await limiter.take(key, limit) else { return }
        throw StoreError.rateLimited(what, retryAfter: seconds)
    }
}
