import Crypto
import Foundation
import Hummingbird

/// Lets a request through to the operator's routes only with `Authorization: Bearer <admin token>`.
struct AdminMiddleware: RouterMiddleware {
    let token: String

    func handle(_ request: Request, context: KioskRequestContext, next: (Request, KioskRequestContext) async throws -> Response) async throws -> Response {
        guard Self.matches(JSONBody.bearerToken(request) ?? "", token) else {
            throw APIFailure.unauthorized("admin calls need Authorization: Bearer <the token in the server's data folder, admin-token>")
        }
        return try await next(request, context)
    }

    /// Compared in constant time: a comparison that stops at the first wrong byte would tell an
    /// attacker, by its timing, how much of a guess was right. Hashed first, so that the length
    /// of the token is not told either.
    static func matches(_ presented: String, _ expected: String) -> Bool {
        let presented = SHA256.hash(data: Data(presented.utf8))
        let expected = SHA256.hash(data: Data(expected.utf8))
        var difference: UInt8 = 0
        for (a, b) in zip(presented, expected) { difference |= a ^ b }
        return difference == 0
    }
}
