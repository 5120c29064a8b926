import CCurl

/// A transfer that did not complete, naming the URL and saying whether trying later may help.
public struct TransferError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// Nothing answered: refused connection, unknown host.
        case unreachable
        /// The connection timed out or stalled below the minimum speed.
        case timedOut
        /// The connection broke in the middle of the transfer.
        case interrupted
        /// The local disk refused a write (full, read-only, removed).
        case localWrite
        /// The transfer was stopped on purpose.
        case aborted
        /// The answer was larger than the caller accepts.
        case tooLarge
        /// Anything else libcurl reports.
        case failed

        /// The one rule for transport failures: nothing answered, the connection timed out or
        /// broke, or the transfer was stopped from outside — trying again later may work. A full
        /// disk, a body too large and anything else libcurl reports need someone to change something.
        public var isTransient: Bool {
            switch self {
            case .unreachable, .timedOut, .interrupted, .aborted: return true
            case .localWrite, .failed, .tooLarge: return false
            }
        }

        init(_ code: CURLcode) {
            switch code {
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
                self = .unreachable
            case CURLE_OPERATION_TIMEDOUT:
                self = .timedOut
            case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING:
                self = .interrupted
            case CURLE_WRITE_ERROR:
                self = .localWrite
            case CURLE_ABORTED_BY_CALLBACK:
                self = .aborted
            default:
                self = .failed
            }
        }
    }

    public var url: String
    public var kind: Kind
    public var message: String

    public init(url: String, kind: Kind, message: String) {
        self.url = url
        self.kind = kind
        self.message = message
    }

    /// True when the same request may succeed later without anyone changing anything.
    public var isTransient: Bool { kind.isTransient }

    public var description: String {
        switch kind {
        case .unreachable: return "cannot reach \(url): \(message)"
        default: return "\(url): \(message)"
        }
    }
}
