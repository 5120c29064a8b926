import HTTPTypes
import KioskCore
import KioskStore

extension ReceiptRefusal {
    /// The answer to a download with this proof: 401 with the refusal's own words, so a reader
    /// sees what the client would have said on the same receipt.
    var apiFailure: APIFailure {
        switch self {
        case .malformed:
            return APIFailure(.unauthorized, code: "receipt_malformed", message: description)
        case .algorithmNotAllowed, .notAuthentic:
            return APIFailure(.unauthorized, code: "receipt_not_authentic", message: description)
        case .unknownKey, .keyRetired:
            // Most often a key the operator retired (kiosk keys retire): the purchase stands, and
            // the transaction list hands out its receipt signed with a current key.
            return APIFailure(.unauthorized, code: "receipt_key_untrusted", message: description)
        case .wrongEnvironment:
            return APIFailure(.unauthorized, code: "receipt_wrong_environment", message: description)
        case .wrongIssuer:
            return APIFailure(.unauthorized, code: "receipt_wrong_issuer", message: description)
        case .otherAccount:
            return APIFailure(.forbidden, code: "receipt_other_account", message: description)
        case .untrustedKeys:
            // The store's own keys: its fault, not the reader's.
            return APIFailure(.serviceUnavailable, code: "keys_unavailable", message: description, retryAfter: 5)
        case .appStore(let refusal):
            // The same kinds of answer as Kiosk's own receipts, with the App Store's reason named.
            return APIFailure(.unauthorized, code: "appstore_\(refusal.reason)", message: description)
        }
    }
}
