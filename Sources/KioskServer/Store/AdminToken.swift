import Foundation

/// The secret that admin calls (approving an Ask to Buy, revoking) must carry.
///
/// `kiosk serve` writes it to `<data>/admin-token` (mode 0600) on first start and keeps it.
public enum AdminToken {
    public static func loadOrCreate(in dataDirectory: URL) throws -> String {
        let file = dataDirectory.appendingPathComponent("admin-token")
        if let existing = try? String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !existing.isEmpty {
            return existing
        }
        let token = Store.randomHex(bytes: 24)
        try Data((token + "\n").utf8).write(to: file, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        return token
    }
}
