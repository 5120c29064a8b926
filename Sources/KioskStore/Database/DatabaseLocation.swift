import Foundation

/// Where the store's database lives, as `kiosk serve --database` names it.
///
/// - `sqlite:PATH` (or a bare path): one file, the embedded default; no server to run.
/// - `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (also `postgresql://`, and `postgres+uds://` for
///   a unix socket, as postgres-kit reads them): a shared database for any number of instances.
public enum DatabaseLocation: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(url: String)

    /// - Throws: ``ServerSetupError`` for a scheme Kiosk does not speak.
    public init(parsing text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("sqlite:") {
            var path = String(trimmed.dropFirst("sqlite:".count))
            // `sqlite:///abs/path` and `sqlite://rel` read like URLs; accept both spellings.
            if path.hasPrefix("//") { path.removeFirst(2) }
            guard !path.isEmpty else {
                throw ServerSetupError(path: text, problem: "names no file", action: "write sqlite:PATH, for example sqlite:/var/lib/kiosk/store.sqlite")
            }
            self = .sqlite(path: path)
        } else if ["postgres://", "postgresql://", "postgres+tcp://", "postgres+uds://", "postgresql+uds://"].contains(where: trimmed.hasPrefix) {
            self = .postgres(url: trimmed)
        } else if !trimmed.contains("://"), !trimmed.isEmpty {
            self = .sqlite(path: trimmed)
        } else {
            throw ServerSetupError(path: text, problem: "is not a database Kiosk can use",
                action: "give sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE")
        }
    }

    /// The location with any password blanked, for logs and messages.
    public var description: String {
        switch self {
        case .sqlite(let path):
            return "sqlite:\(path)"
        case .postgres(let url):
            guard var components = URLComponents(string: url) else { return "postgres://…" }
            if components.password != nil { components.password = "***" }
            return components.string ?? "postgres://…"
        }
    }
}
