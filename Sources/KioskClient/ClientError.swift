/// What went wrong on the client, naming the thing at fault and what to do.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    case noServer
    case serverUnreachable(url: String, detail: String)
    case serverError(url: String, status: Int, message: String)
    case badResponse(url: String, detail: String)

    public var description: String {
        switch self {
        case .noServer:
            return "no server is known yet; pass --server URL or set KIOSK_SERVER"
        case .serverUnreachable(let url, let detail):
            return "cannot reach \(url) (\(detail)); check the server is running and try again"
        case .serverError(let url, let status, let message):
            return "\(url) answered \(status): \(message)"
        case .badResponse(let url, let detail):
            return "\(url) sent a response Kiosk cannot read (\(detail)); is this a Kiosk server?"
        }
    }
}
