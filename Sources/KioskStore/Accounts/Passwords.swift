import Crypto
import Foundation
import HummingbirdBcrypt
import NIOPosix
import Synchronization

/// How passwords are checked and kept: NIST SP 800-63B's rules, and bcrypt (hummingbird-auth's
/// `HummingbirdBcrypt`) at a cost the operator chooses.
///
/// - A password is normalized (Unicode NFKC, as 800-63B §5.1.1.2 asks) and then counted: at least
///   8 characters, at most 1,024; no rules of composition.
/// - bcrypt reads only its first 72 bytes, so a long password would lose its tail, and a NUL
///   would end it. It is given the base64 of the normalized password's SHA-256 instead: 44 bytes
///   carrying all of it.
/// - Hashing takes a fraction of a second on purpose; it runs on NIO's thread pool, never on the
///   cooperative pool where it would hold up every other request.
/// - A sign-in with an unknown email still checks a password, against a ``decoy`` hash of the
///   same cost, so a wrong email and a wrong password take the same time.
final class Passwords: Sendable {
    /// bcrypt's log2 rounds. 12 is the default: about 0.25 s a hash here (docs/accounts.md).
    let cost: UInt8
    private let decoyHash = Mutex<String?>(nil)

    static let shortest = 8
    static let longest = 1024
    /// The least cost a production store accepts (OWASP's floor); tests use 4 in the sandbox.
    static let leastProductionCost: UInt8 = 10

    init(cost: UInt8) {
        self.cost = min(max(cost, 4), 31)
    }

    /// The password as it is hashed, or why it is refused.
    static func normalized(_ password: String) throws -> String {
        let text = password.precomposedStringWithCompatibilityMapping
        let length = text.count
        guard length >= shortest else {
            throw StoreError.invalidRequest("the password has \(length) characters; use at least \(shortest) (a phrase of a few words is best)")
        }
        guard length <= longest else {
            throw StoreError.invalidRequest("the password has \(length) characters; use at most \(longest)")
        }
        return text
    }

    /// bcrypt's input for a normalized password (see the type's comment).
    private static func bcryptInput(_ normalized: String) -> String {
        Data(SHA256.hash(data: Data(normalized.utf8))).base64EncodedString()
    }

    /// The hash to keep for a new password.
    func hash(_ password: String) async throws -> String {
        let input = Self.bcryptInput(try Self.normalized(password))
        let cost = cost
        return try await NIOThreadPool.singleton.runIfActive { Bcrypt.hash(input, cost: cost) }
    }

    /// Whether `password` is the one `hash` was made from; with no hash (an unknown email), checks
    /// against the decoy and answers false, in the same time.
    func verify(_ password: String, hash: String?) async throws -> Bool {
        // A password that could never have been set is checked all the same, for the same time.
        let input = Self.bcryptInput((try? Self.normalized(password)) ?? password)
        let stored: String
        if let hash { stored = hash } else { stored = try await decoy() }
        let matches = try await NIOThreadPool.singleton.runIfActive { Bcrypt.verify(input, hash: stored) }
        return matches && hash != nil
    }

    /// A hash of a random password at this cost, made once.
    private func decoy() async throws -> String {
        if let made = decoyHash.withLock({ $0 }) { return made }
        let made = try await hash(Store.randomHex(bytes: 16))
        return decoyHash.withLock { stored in
            if let stored { return stored }
            stored = made
            return made
        }
    }

    /// Makes the decoy now, so the first unknown email is not the one answer that takes twice as long.
    func prepare() async {
        _ = try? await decoy()
    }
}

/// An email address as the store keys sign-ins by it: trimmed, NFC, lowercased (mail providers
/// treat the whole address without regard to case, and a reader types it either way).
public enum EmailAddress {
    /// What a limit of sign-in attempts counts an email by: its normalized form, or, for a text
    /// that is no email address, the same trimmed and lowercased (every spelling the store would
    /// take for one address falls in one bucket).
    public static func bucketName(_ email: String) -> String {
        (try? normalized(email)) ?? email.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping.lowercased()
    }

    public static func normalized(_ email: String) throws -> String {
        let text = email.trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping.lowercased()
        guard let at = text.lastIndex(of: "@"), at != text.startIndex, text.index(after: at) != text.endIndex,
              text.utf8.count <= 254,
              !text.unicodeScalars.contains(where: { $0.properties.isWhitespace || NewDevice.isHidden($0) }),
              // One address, not a list or a display name: none of what would split or wrap it on the wire.
              !text.contains(where: { ",;<>()[]\\\"".contains($0) }) else {
            throw StoreError.invalidRequest("\"\(email.prefix(80))\" is not an email address; write it as name@example.com")
        }
        return text
    }
}
