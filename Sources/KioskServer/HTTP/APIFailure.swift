import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import NIOCore

/// An error response with the JSON body `{code, message}` of the wire contract.
///
/// Thrown at the HTTP edge only: a request that cannot be parsed, a missing or wrong credential,
/// the content route's own answers. The store's refusals are ``StoreError``s, which
/// `StoreError+HTTP.swift` turns into these.
public struct APIFailure: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    /// Seconds before the same request may succeed (429, 503), sent as `Retry-After`.
    public var retryAfter: Int?

    public init(_ status: HTTPResponse.Status, code: String, message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = try JSONEncoder.kiosk.encode(APIError(code: code, message: message))
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        // An error's message may quote what was asked (an unknown path): never sniffed as HTML.
        if let sniffing = HTTPField.Name("X-Content-Type-Options") { headers[sniffing] = "nosniff" }
        if status == .unauthorized {
            headers[.wwwAuthenticate] = "Bearer"
        }
        if let retryAfter {
            headers[.retryAfter] = String(retryAfter)
        }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func unauthorized(_ message: String) -> APIFailure {
        APIFailure(.unauthorized, code: "unauthorized", message: message)
    }

    static func badRequest(_ message: String) -> APIFailure {
        APIFailure(.badRequest, code: "bad_request", message: message)
    }
}
