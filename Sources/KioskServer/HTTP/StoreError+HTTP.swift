import KioskStore
import HTTPTypes
import Hummingbird

/// The one place where the store's refusals become HTTP answers: the status of each reason, and
/// the `{code, message}` body (with `Retry-After` where the refusal passes) that ``APIFailure``
/// writes for every error of the wire contract.
extension StoreError: HTTPResponseError {
    public var status: HTTPResponse.Status {
        switch reason {
        case .invalidRequest: .badRequest
        case .unknownAccount, .unknownTransaction, .unknownProduct: .notFound
        case .wrongState: .conflict
        case .forbidden: .forbidden
        case .notPaid: HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required")
        case .keyReused: HTTPResponse.Status(code: 422, reasonPhrase: "Unprocessable Content")
        case .unavailable: .serviceUnavailable
        case .rateLimited: HTTPResponse.Status(code: 429, reasonPhrase: "Too Many Requests")
        case .unauthorized: .unauthorized
        }
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        try APIFailure(status, code: code, message: message, retryAfter: retryAfter).response(from: request, context: context)
    }
}
