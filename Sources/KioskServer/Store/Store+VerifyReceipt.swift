import Foundation
import KioskCore

extension Store {
    /// `POST /verifyReceipt`: checks a receipt the way the App Store's endpoint does.
    ///
    /// - Parameters:
    ///   - body: the raw request body, `{"receipt-data": "<base64 of the JWS, or the JWS itself>"}`.
    ///   - presentedBy: the account presenting the receipt, when the request carried a token;
    ///     another account's receipt is answered as unknown (21010).
    func verifyReceipt(body: Data, presentedBy accountId: String?) async -> VerifyReceiptResponse {
        guard let request = try? JSONDecoder().decode(VerifyReceiptRequest.self, from: body), !request.receiptData.isEmpty else {
            return VerifyReceiptResponse(status: VerifyReceiptStatus.badRequest, environment: environment, receipt: nil)
        }
        guard let jws = Self.compactJWS(from: request.receiptData) else {
            return VerifyReceiptResponse(status: VerifyReceiptStatus.malformed, environment: environment, receipt: nil)
        }
        let claims: ReceiptClaims
        do {
            // Signature, key, environment, issuer and the presenting account: the one policy. (An App
            // Store JWS, issue 33, will pick its own verifier here by its header's `x5c`.)
            guard let verifier = proofs.verifier(for: .kioskReceipt) else {
                return VerifyReceiptResponse(status: VerifyReceiptStatus.notAuthentic, environment: environment, receipt: nil)
            }
            claims = try await verifier.verify(jws, presentedBy: accountId).claims
        } catch let refusal as ReceiptRefusal {
            return VerifyReceiptResponse(status: refusal.verifyReceiptStatus, environment: environment, receipt: nil)
        } catch {
            logger.warning("a receipt could not be checked", metadata: ["error": "\(error)"])
            return VerifyReceiptResponse(status: VerifyReceiptStatus.serverUnavailable, environment: environment, receipt: nil)
        }
        let record = try? await database.read { try await $0.storeTransaction(claims.transactionId) }
        guard let record, record.status == .purchased, record.accountId == claims.accountId else {
            return VerifyReceiptResponse(status: VerifyReceiptStatus.revokedOrUnknown, environment: environment, receipt: nil)
        }
        if let expires = claims.expires, expires < Date() {
            return VerifyReceiptResponse(status: VerifyReceiptStatus.subscriptionExpired, environment: environment, receipt: claims)
        }
        return VerifyReceiptResponse(status: VerifyReceiptStatus.valid, environment: environment, receipt: claims)
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
