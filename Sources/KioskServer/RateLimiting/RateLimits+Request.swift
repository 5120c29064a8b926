import HTTPTypes
import KioskStore

extension RateLimits {
    /// The client a request comes from (``RateLimits/clientAddress(peer:forwardedFor:)``), from
    /// its connection's peer and its `X-Forwarded-For` fields: the one reading the rate limits,
    /// the request log and the event loop's catalog 304s share.
    func clientAddress(peer: String?, fields: HTTPFields) -> String? {
        let forwardedFor = HTTPField.Name("X-Forwarded-For").map { fields[values: $0].joined(separator: ",") } ?? ""
        return clientAddress(peer: peer, forwardedFor: forwardedFor.isEmpty ? nil : forwardedFor)
    }
}
