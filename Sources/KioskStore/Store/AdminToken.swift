import Foundation

/// The secret that admin calls (approving an Ask to Buy, revoking, refunding, the reports) must carry.
///
/// `kiosk serve` creates `<data>/admin-token` (mode 0600 from the start) on first start and keeps it.
public enum AdminToken {
    /// - Throws: ``ServerSetupError`` when the file exists but cannot be read or is empty.
    public static func loadOrCreate(in dataDirectory: URL) throws -> String {
        let file = dataDirectory.appendingPathComponent("admin-token")
        let data = try SecretFile.read(file, what: "admin token")
            ?? SecretFile.create(file, data: Data((Store.randomHex(bytes: 24) + "\n").utf8), what: "admin token")
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty, !token.contains(where: \.isWhitespace) else {
            throw ServerSetupError(path: file.path, problem: "holds no usable token", action: "write a token into it (one line), or remove it to have a new one made")
        }
        return token
    }
}
