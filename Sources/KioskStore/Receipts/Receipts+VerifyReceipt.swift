import Foundation
import KioskCore

extension Receipts {
    /// `POST /verifyReceipt`: checks a receipt the way the App Store's endpoint does.
    ///
    /// - Parameters:
    ///   - body: the raw request body, `{"receipt-data": "<base64 of the JWS, or the JWS itself>"}`.
    ///   - presentedBy: the account presenting the receipt, when the request carried a token;
    ///     another account's receipt is answered as unknown (21010).
    public func verifyReceipt(body: Data, presentedBy accountId: String?) async -> VerifyReceiptResponse {
        guard let request = try? JSONDecoder().decode(VerifyReceiptRequest.self, from: body), !request.receiptData.isEmpty else {
            return VerifyReceiptResponse(status: VerifyReceiptStatus.badRequest, environment: environment, receipt: nil)
        }
        guard let jws = Self.compactJWS(from: request.receiptData) else {
            return VerifyReceiptResponse(status: VerifyReceiptStatus.malformed, environment: environment, receipt: nil)
        }
        let verified: VerifiedPurchase
        do {
            // Signature, key, environment, issuer and the presenting account: the proof's own
            // verifier. An App Store signed transaction is told apart by the chain in its header.
            let kind: PurchaseProofKind = Self.carriesCertificateChain(jws) ? .appStore : .kioskReceipt
            guard let verifier = proofs.verifier(for: kind) else {
                return VerifyReceiptResponse(status: VerifyReceiptStatus.notAuthentic, environment: environment, receipt: nil)
            }
            verified = try await verifier.verify(jws, presentedBy: accountId)
        } catch let refusal as ReceiptRefusal {
            return VerifyReceiptResponse(status: refusal.verifyReceiptStatus, environment: environment, receipt: nil)
        } catch {
            logger.warning("a receipt could not be checked", metadata: ["error": "\(error)"])
            return VerifyReceiptResponse(status: VerifyReceiptStatus.serverUnavailable, environment: environment, receipt: nil)
        }
        let claims = verified.claims
        guard (try? await stands(verified)) == true else {
            return VerifyReceiptResponse(status: VerifyReceiptStatus.revokedOrUnknown, environment: environment, receipt: nil)
        }
        // A period's end is in the account's time (the sandbox may run it ahead), never the wall's.
        if let expires = claims.expires, expires < ((try? await accountNow(claims.accountId)) ?? clock.now()) {
            return VerifyReceiptResponse(status: VerifyReceiptStatus.subscriptionExpired, environment: environment, receipt: claims)
        }
        return VerifyReceiptResponse(status: VerifyReceiptStatus.valid, environment: environment, receipt: claims)
    }

    /// Whether the proof's transaction still stands in the record its kind of proof is kept in.
    private func stands(_ verified: VerifiedPurchase) async throws -> Bool {
        let claims = verified.claims
        if verified.kind == .appStore {
            guard verified.revoked == nil else { return false }
            let periods = try await database.read { try await AppStoreBridge.transactions(original: claims.originalTransactionId, in: $0) }
            return periods.first { $0.transactionId == claims.transactionId }?.revokedAt == nil
        }
        let record = try? await database.read { try await TransactionRows($0).find(claims.transactionId) }
        guard let record, record.status == .purchased, record.accountId == claims.accountId else { return false }
        return true
    }

    /// True when a JWS header carries an `x5c` certificate chain, as App Store signed data does
    /// (Kiosk's own receipts name a `kid` instead).
    static func carriesCertificateChain(_ jws: String) -> Bool {
        guard let first = jws.split(separator: ".").first,
              let header = Data(base64URLEncoded: String(first)),
              let object = try? JSONSerialization.jsonObject(with: header) as? [String: Any]
        else { return false }
        return object["x5c"] != nil
    }

    /// The JWS inside `receipt-data`: base64 of the compact JWS, or (leniently) the JWS itself.
    static func compactJWS(from receiptData: String) -> String? {
        let looksLikeJWS = { (text: String) in text.split(separator: ".", omittingEmptySubsequences: false).count == 3 }
        if looksLikeJWS(receiptData) { return receiptData }
        guard let data = Data(base64Encoded: receiptData), let text = String(data: data, encoding: .utf8), looksLikeJWS(text) else {
            return nil
        }
        return text
    }
}

extension Data {
    /// base64url, padded or not, as JWS parts are.
    init?(base64URLEncoded text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        self.init(base64Encoded: base64)
    }
}

extension ReceiptRefusal {
    /// The `/verifyReceipt` status, as the App Store's endpoint numbers them.
    var verifyReceiptStatus: Int {
        switch self {
        case .malformed:
            return VerifyReceiptStatus.malformed
        case .algorithmNotAllowed, .notAuthentic, .unknownKey, .keyRetired, .wrongIssuer:
            return VerifyReceiptStatus.notAuthentic
        case .wrongEnvironment(let receipt, _):
            return receipt == .sandbox ? VerifyReceiptStatus.sandboxReceiptSentToProduction : VerifyReceiptStatus.productionReceiptSentToSandbox
        case .otherAccount:
            // Another account's receipt is not confirmed to exist at all.
            return VerifyReceiptStatus.revokedOrUnknown
        case .untrustedKeys:
            return VerifyReceiptStatus.serverUnavailable
        case .appStore(.format):
            return VerifyReceiptStatus.malformed
        case .appStore(.environment(_, let found)):
            return found == AppStoreEnvironment.sandbox.rawValue
                ? VerifyReceiptStatus.sandboxReceiptSentToProduction : VerifyReceiptStatus.productionReceiptSentToSandbox
        case .appStore:
            return VerifyReceiptStatus.notAuthentic
        }
    }
}
