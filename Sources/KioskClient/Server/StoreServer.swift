import Foundation

/// The store a home talks to: given on the command line, or the one remembered from before.
///
/// Resolved once, when the engine opens; the parts that talk to the store ask it for the base URL
/// when they need one, so an engine that was never told of a server still lists its library.
struct StoreServer: Sendable {
    /// The base URL without a trailing slash, or nil when none was ever given.
    let url: String?

    /// The base URL.
    /// - Throws: ``ClientError/noServer`` when none was ever given.
    func base() throws -> String {
        guard let url else { throw ClientError.noServer }
        return url
    }
}
