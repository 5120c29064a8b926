import Foundation
import KioskServer
import KioskStore

/// The engines the store's suite runs on: each test that takes one runs once per engine.
public enum TestEngine: String, Sendable, CaseIterable, CustomStringConvertible {
    case sqlite, postgres

    public static let all = allCases
    public var description: String { rawValue }

    /// A fresh, empty database of this engine: nil for SQLite (the data folder's default file).
    public func freshDatabase() async throws -> DatabaseLocation? {
        switch self {
        case .sqlite: return nil
        case .postgres: return try await TestPostgres.shared.freshDatabase()
        }
    }
}

/// A throwaway PostgreSQL cluster shared by the tests of one process.
///
/// Started on first use by `scripts/postgres-cluster`, the repository's one PostgreSQL launcher
/// (the fault suite, the bench and `make cluster` use it too): `initdb` into a temporary folder
/// (as the `postgres` user when the tests run as root, since PostgreSQL refuses root), `postgres`
/// on a free port of 127.0.0.1 with its socket in that folder. Each test gets a database of its
/// own. The launcher's watchdog stops the server by PID and deletes the folder as soon as the test
/// process is gone, however it ended. A missing PostgreSQL fails the test with what to install; it
/// is never skipped.
public actor TestPostgres {
    public static let shared = TestPostgres()

    public struct Cluster: Sendable {
        public var port: Int
        public var folder: String
        public var bin: String
        /// PostgreSQL's own server process.
        public var pid: Int32
    }

    private var started: Cluster?
    private var counter = 0

    /// A new empty database on the shared cluster.
    public func freshDatabase() async throws -> DatabaseLocation {
        let cluster = try await cluster()
        counter += 1
        let name = "kiosk_test_\(getpid())_\(counter)"
        try TestPostgres.psql(cluster, database: "postgres", "CREATE DATABASE \(name)")
        return .postgres(url: "postgres://kiosk@127.0.0.1:\(cluster.port)/\(name)?tlsmode=disable")
    }

    /// A new database owned by a new role that is not a superuser, so its rights can be taken away
    /// (a superuser passes every check), and the location that signs in as that role.
    public func ordinaryRoleDatabase() async throws -> OrdinaryRoleDatabase {
        let cluster = try await cluster()
        counter += 1
        let role = "kiosk_role_\(getpid())_\(counter)"
        let name = "kiosk_role_db_\(getpid())_\(counter)"
        try TestPostgres.psql(cluster, database: "postgres", "CREATE ROLE \(role) LOGIN")
        try TestPostgres.psql(cluster, database: "postgres", "CREATE DATABASE \(name) OWNER \(role)")
        return OrdinaryRoleDatabase(cluster: cluster, role: role, name: name)
    }

    /// A database and its owner that is not a superuser (``ordinaryRoleDatabase()``).
    public struct OrdinaryRoleDatabase: Sendable {
        public let cluster: Cluster
        public let role: String
        public let name: String

        /// The URL that signs in as the role.
        public var url: String { "postgres://\(role)@127.0.0.1:\(cluster.port)/\(name)?tlsmode=disable" }
        public var location: DatabaseLocation { .postgres(url: url) }

        /// `psql -c SQL` in the database, as the cluster's superuser (to revoke and grant).
        public func psql(_ sql: String) throws {
            try TestPostgres.psql(cluster, database: name, sql)
        }

        /// Drops the database and its role; the stores using it must be stopped first.
        public func drop() throws {
            try TestPostgres.psql(cluster, database: "postgres", "DROP DATABASE \(name) WITH (FORCE)")
            try TestPostgres.psql(cluster, database: "postgres", "DROP ROLE \(role)")
        }
    }

    /// The running cluster, started on first use.
    public func cluster() async throws -> Cluster {
        if let started { return started }
        let cluster = try Self.start()
        started = cluster
        return cluster
    }

    /// `psql -c SQL` against the cluster, as the cluster's superuser; returns the rows it printed
    /// (unaligned, without headers: a field per `|`, a row per line).
    @discardableResult
    public static func psql(_ cluster: Cluster, database: String, _ sql: String) throws -> String {
        let (status, output) = try run(cluster.bin + "/psql", ["-X", "-q", "-t", "-A", "-h", "127.0.0.1", "-p", String(cluster.port), "-U", "kiosk", "-d", database, "-v", "ON_ERROR_STOP=1", "-c", sql])
        guard status == 0 else { throw TestServiceError("psql -c \(sql) failed: \(output)") }
        return output
    }

    // MARK: Starting

    /// `scripts/postgres-cluster`, found from this file's own path.
    static let launcher = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scripts").appendingPathComponent("postgres-cluster").path

    /// Starts the cluster with the launcher, watched by this process: `start FOLDER --watch PID`
    /// prints `port=… pid=… bin=…`. A missing PostgreSQL is the launcher's own message ("PostgreSQL
    /// is not installed …; run `make test`, which installs it …").
    private static func start() throws -> Cluster {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kiosk-pg-\(UUID().uuidString.prefix(8))").path
        let (status, output) = try run("/usr/bin/env", ["python3", launcher, "start", folder, "--watch", String(getpid())])
        guard status == 0 else {
            throw TestServiceError(output.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        var fields: [String: String] = [:]
        for field in output.split(whereSeparator: \.isWhitespace) {
            let parts = field.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        guard let port = fields["port"].flatMap({ Int($0) }), let pid = fields["pid"].flatMap({ Int32($0) }), let bin = fields["bin"] else {
            throw TestServiceError("scripts/postgres-cluster printed no port=… pid=… bin=… line: \(output)")
        }
        return Cluster(port: port, folder: folder, bin: bin, pid: pid)
    }

    static func freePort() throws -> Int {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }
        guard bound == 0 else { throw TestServiceError("cannot find a free port") }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> (Int32, String) {
        try ToolProcess.run(executable, arguments)
    }
}

/// A server a test needs (PostgreSQL, nginx) is missing or did not start: what, and what to do.
public struct TestServiceError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
