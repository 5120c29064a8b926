import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import NIOCore

/// JSON in and out with Kiosk's encoder, and errors that say which field was wrong.
enum JSONBody {
    static func response(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let body = try JSONEncoder.kiosk.encode(value)
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    static func decode<T: Decodable>(_ type: T.Type, from request: Request) async throws -> T {
        try decode(type, from: Data(buffer: try await body(of: request, upTo: 1 << 20)))
    }

    /// The request's body, at most `limit` bytes; a longer one is a JSON 413 saying the limit.
    static func body(of request: Request, upTo limit: Int) async throws -> ByteBuffer {
        do {
            return try await request.body.collect(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIFailure(.contentTooLarge, code: "too_large", message: "the body is larger than this call takes (\(limit / 1024) KiB); send less")
        }
    }

    /// Decodes a body already read, with the same one-line 400s naming the field at fault.
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        do {
            return try JSONDecoder.kiosk.decode(T.self, from: data)
        } catch let DecodingError.keyNotFound(key, _) {
            throw APIFailure.badRequest("the body is missing the field \"\(key.stringValue)\"")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            let field = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw APIFailure.badRequest("the field \"\(field)\" has the wrong type")
        } catch let DecodingError.dataCorrupted(context) {
            let field = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw APIFailure.badRequest(field.isEmpty ? "the body is not valid JSON" : "the field \"\(field)\" has a value this store does not accept")
        }
    }

    /// The token of an `Authorization: Bearer <token>` header.
    ///
    /// The scheme is matched without regard to case, and spaces and tabs around the token are
    /// dropped. Only the scheme's seven characters are lowercased and the trim is by hand:
    /// lowercasing the whole header and Foundation's trim came to 1.4 % of a purchase's CPU.
    static func bearerToken(_ request: Request) -> String? {
        guard let value = request.headers[.authorization], value.prefix(7).lowercased() == "bearer " else { return nil }
        func isSpace(_ character: Character) -> Bool { character == " " || character == "\t" }
        var token = value.dropFirst(7).drop(while: isSpace)
        while let last = token.last, isSpace(last) { token.removeLast() }
        return String(token)
    }
}
