import Foundation
import HTTPTypes
import Hummingbird
import KioskStore

/// The store's own address as the client reached it, for the absolute links it writes (OPDS
/// feeds, the device code's verification address) and for the account page's cookie: one place,
/// where there were three copies and one took the `Host` header unchecked.
///
/// The `Host` is kept only when it is a name or an address and a port, nothing else (a header is
/// the client's to forge; a link written with `"><script>` in it must not be). https when the proxy
/// in front says so (`X-Forwarded-Proto`, which deploy/nginx.conf sets), and only a trusted proxy
/// is heard: ``ForwardedProtoMiddleware`` drops the header from anyone else.
enum RequestOrigin {
    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")

    /// Whether the client reached the store over HTTPS, as the trusted proxy in front says.
    static func isSecure(_ request: Request) -> Bool {
        forwardedProto.flatMap { request.headers[$0] }?.lowercased() == "https"
    }

    /// `scheme://host[:port]`, with 127.0.0.1 in place of a `Host` that is missing or not a host.
    static func base(of request: Request) -> String {
        // HTTP/1's Host header is the request's authority once read (HTTPTypes keeps it there alone).
        let host = request.head.authority ?? ""
        return "\(isSecure(request) ? "https" : "http")://\(isHost(host) ? host : "127.0.0.1")"
    }

    /// A name or an address (IPv6 in brackets), then at most a port of 1 to 65535: what a link
    /// may be written with. Nothing else a client sends (quotes, spaces, an empty name, a port of
    /// letters) ever reaches a page or a feed.
    static func isHost(_ authority: String) -> Bool {
        guard !authority.isEmpty, authority.utf8.count <= 255, authority.allSatisfy(\.isASCII) else { return false }
        let port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return false }
            let address = authority[authority.index(after: authority.startIndex)..<close]
            guard !address.isEmpty, address.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return false }
            let rest = authority[authority.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return false }
            port = rest.isEmpty ? nil : rest.dropFirst()
        } else {
            let parts = authority.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard !parts[0].isEmpty, parts[0].allSatisfy({ $0.isLetter || $0.isNumber || "._-".contains($0) }) else { return false }
            port = parts.count == 2 ? parts[1] : nil
        }
        guard let port else { return true }
        return !port.isEmpty && port.count <= 5 && port.allSatisfy(\.isNumber) && (1...65_535).contains(Int(port) ?? 0)
    }
}

/// Drops `X-Forwarded-Proto` from a request whose peer is not a `--trusted-proxy`, before any
/// handler reads it (``RequestOrigin``): a client talking to the store directly could otherwise
/// say "https" and be given `Secure` cookies and https links over plain HTTP, as `X-Forwarded-For`
/// is believed only from a trusted proxy (``RateLimits/clientAddress(peer:forwardedFor:)``).
struct ForwardedProtoMiddleware: RouterMiddleware {
    let rateLimits: RateLimits

    func handle(_ request: Request, context: KioskRequestContext, next: (Request, KioskRequestContext) async throws -> Response) async throws -> Response {
        guard let name = RequestOrigin.forwardedProto, request.headers[name] != nil, !rateLimits.isTrustedProxy(context.peerAddress) else {
            return try await next(request, context)
        }
        var head = request.head
        head.headerFields[name] = nil
        return try await next(Request(head: head, body: request.body), context)
    }
}
