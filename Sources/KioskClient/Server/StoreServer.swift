import Foundation
import Synchronization

/// The store a home talks to: given on the command line, or the one remembered from before.
///
/// Resolved once, when the engine opens; the parts that talk to the store ask it for the base URL
/// when they need one, so an engine that was never told of a server still lists its library. A
/// server given anew is remembered only once it has answered as a Kiosk store (``answered()``),
/// so a mistyped URL whose first request failed is not the one the next command talks to.
struct StoreServer: Sendable {
    /// The base URL without a trailing slash, or nil when none was ever given.
    let url: String?
    private let memory: Memory?

    /// Keeps a server given anew until it answers, then writes it once.
    private final class Memory: Sendable {
        let pending = Mutex(true)
        let settings: HomeSettings

        init(settings: HomeSettings) {
            self.settings = settings
        }
    }

    /// - Parameter rememberIn: where to remember `url` the first time the store answers, when it
    ///   is new to this home; nil when it is the remembered one.
    init(url: String?, rememberIn settings: HomeSettings? = nil) {
        self.url = url
        memory = settings.map(Memory.init(settings:))
    }

    /// The base URL.
    /// - Throws: ``ClientError/noServer`` when none was ever given.
    func base() throws -> String {
        guard let url else { throw ClientError.noServer }
        return url
    }

    /// The store answered as a Kiosk store (a JSON answer of its API, or its catalog).
    func answered() {
        guard let url, let memory, memory.pending.withLock({ pending in defer { pending = false }; return pending }) else { return }
        try? memory.settings.rememberServer(url)
    }

    /// A server URL as the engine keeps it: http or https with a host, no trailing slash.
    /// - Throws: ``ClientError/invalidRequest(_:)`` naming the URL and what to check.
    static func normalized(_ text: String) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let scheme = trimmed.split(separator: ":", maxSplits: 1).first.map { $0.lowercased() } ?? ""
        guard trimmed.contains("://"), scheme == "http" || scheme == "https" else {
            let shown = scheme.isEmpty || !trimmed.contains("://") ? "\"\(trimmed)\" is not a URL" : "\(scheme):// is not supported"
            throw ClientError.invalidRequest("\(shown); a Kiosk store is reached over http:// or https:// (e.g. --server http://127.0.0.1:8080)")
        }
        guard let components = URLComponents(string: trimmed), let host = components.host, !host.isEmpty else {
            throw ClientError.invalidRequest("\"\(trimmed)\" names no host; a store URL looks like http://127.0.0.1:8080")
        }
        // The API's paths are appended to the URL as it is: a query or a fragment would end up
        // in the middle of every request's path.
        guard components.query == nil, components.fragment == nil else {
            throw ClientError.invalidRequest("\"\(trimmed)\" has a query or a fragment; give the store's base URL alone, like http://127.0.0.1:8080 (a path prefix such as /kiosk is fine)")
        }
        return trimmed.hasSuffix("/") ? String(trimmed.dropLast()) : trimmed
    }
}
