import Foundation
import HTTPTypes
import Hummingbird

/// The store's own address as the client reached it, for the absolute links it writes (OPDS
/// feeds, the device code's verification address) and for the account page's cookie: one place,
/// where there were three copies and one took the `Host` header unchecked.
///
/// The `Host` is kept only when it is a name or an address and a port, nothing else (a header is
/// the client's to forge; a link written with `"><script>` in it must not be). https when the proxy
/// in front says so (`X-Forwarded-Proto`, which deploy/nginx.conf sets).
enum RequestOrigin {
    /// Whether the client reached the store over HTTPS, as the proxy in front says.
    static func isSecure(_ request: Request) -> Bool {
        HTTPField.Name("X-Forwarded-Proto").flatMap { request.headers[$0] }?.lowercased() == "https"
    }

    /// `scheme://host[:port]`, with 127.0.0.1 in place of a `Host` that is missing or not a host.
    static func base(of request: Request) -> String {
        // HTTP/1's Host header is the request's authority once read (HTTPTypes keeps it there alone).
        let host = request.head.authority ?? ""
        let safe = !host.isEmpty && host.utf8.count <= 255
            && host.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || ".-:[]".unicodeScalars.contains($0) }
        return "\(isSecure(request) ? "https" : "http")://\(safe ? host : "127.0.0.1")"
    }
}
