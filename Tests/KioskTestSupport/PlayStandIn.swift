import Foundation
import Testing

/// Google's token endpoint and the Android Publisher API's `purchases.subscriptionsv2` in the
/// tests (scripts/play_standin.py): it issues an access token only for a service-account assertion
/// joserfc verifies, and answers each subscription as the test sets it.
public final class PlayStandIn: @unchecked Sendable {
    public static let email = "kiosk-play@example-project.iam.gserviceaccount.com"
    public let process = Process()
    public private(set) var url = ""
    let record: URL
    let directory: TemporaryDirectory

    /// One request as the stand-in received it (the token endpoint's with the assertion as joserfc read it).
    public struct Recorded: Decodable, Sendable {
        public var method: String
        public var path: String
        public var grantType: String?
        public var header: [String: String]?
        public var claims: [String: Claim]?
        public var refused: String?
        public var authorized: Bool?

        public enum Claim: Decodable, Sendable, Equatable {
            case text(String), number(Int)
            public init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let number = try? container.decode(Int.self) { self = .number(number) } else { self = .text(try container.decode(String.self)) }
            }
        }
    }

    public static func start() async throws -> PlayStandIn {
        try StripeSigner.requireLibrary()
        return try await offCooperativePool { try PlayStandIn() }
    }

    init() throws {
        directory = try TemporaryDirectory()
        record = directory.path("requests.jsonl")
        let log = directory.path("standin.log")
        FileManager.default.createFile(atPath: record.path, contents: nil)
        FileManager.default.createFile(atPath: log.path, contents: nil)
        try OpenSSL.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "account.pem"], in: directory)
        try OpenSSL.run(["pkey", "-in", "account.pem", "-pubout", "-out", "account.pub.pem"], in: directory)
        try OpenSSL.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "other.pem"], in: directory)
        process.executableURL = StripeSigner.python
        process.arguments = [SampleStore.repository.appendingPathComponent("scripts/play_standin.py").path, record.path,
                             directory.path("account.pub.pem").path, Self.email]
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = try FileHandle(forWritingTo: log)
        try process.runAlone()
        url = try ServerProcess.listeningURL(process, stdout: stdout, log: log)
    }


    /// The service account's JSON key file as the Cloud console gives it, its token URI this
    /// stand-in's; `otherKey` signs with a key the stand-in does not know.
    public func serviceAccount(otherKey: Bool = false) throws -> Data {
        let pem = try String(contentsOf: directory.path(otherKey ? "other.pem" : "account.pem"), encoding: .utf8)
        return try JSONSerialization.data(withJSONObject: [
            "type": "service_account", "project_id": "example-project", "private_key_id": "0123456789abcdef",
            "private_key": pem, "client_email": Self.email, "client_id": "1234567890", "token_uri": "\(url)/token",
        ])
    }

    /// Sets the SubscriptionPurchaseV2 Google answers for `token`.
    public func set(_ token: String, _ subscription: [String: Any]) async throws {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: subscription), as: UTF8.self)
        let encoded = token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token
        let reply = try await StoreHTTP(baseURL: url).send("PUT", "/standin/subscriptions/\(encoded)", json: body)
        try #require(reply.status == 200)
    }

    /// Forgets every access token it issued, as an expired or revoked one is refused.
    public func revokeTokens() async throws {
        try #require(try await StoreHTTP(baseURL: url).send("POST", "/standin/revoke-tokens", json: "{}").status == 200)
    }

    public func requests() throws -> [Recorded] {
        let text = try String(contentsOf: record, encoding: .utf8)
        return try text.split(separator: "\n").map { try JSONDecoder().decode(Recorded.self, from: Data($0.utf8)) }
    }

    public func stop() async {
        _ = try? await offCooperativePool { [self] in
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitForExit(seconds: 30)
            }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
