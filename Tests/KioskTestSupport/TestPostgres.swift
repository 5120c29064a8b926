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
/// Started on first use: `initdb` into a temporary folder (as the `postgres` user when the tests
/// run as root, since PostgreSQL refuses root), `postgres` on a free port of 127.0.0.1 with its
/// socket in that folder. Each test gets a database of its own. A watchdog shell started with it
/// stops the server by PID and deletes the folder as soon as the test process is gone, however
/// it ended. A missing PostgreSQL fails the test with what to install; it is never skipped.
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

    /// The running cluster, started on first use.
    public func cluster() async throws -> Cluster {
        if let started { return started }
        let cluster = try await Self.start()
        started = cluster
        return cluster
    }

    /// `psql -c SQL` against the cluster, as the cluster's superuser.
    public static func psql(_ cluster: Cluster, database: String, _ sql: String) throws {
        let (status, output) = try run(cluster.bin + "/psql", ["-X", "-q", "-h", "127.0.0.1", "-p", String(cluster.port), "-U", "kiosk", "-d", database, "-v", "ON_ERROR_STOP=1", "-c", sql])
        guard status == 0 else { throw TestServiceError("psql -c \(sql) failed: \(output)") }
    }

    // MARK: Starting

    static func binFolder() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap(Int.init).sorted()
        guard let newest = versions.last, FileManager.default.isExecutableFile(atPath: "\(root)/\(newest)/bin/initdb") else {
            throw TestServiceError("PostgreSQL is not installed (no \(root)/*/bin/initdb); run `make test`, which installs it with apt-get install postgresql")
        }
        return "\(root)/\(newest)/bin"
    }

    private static func start() async throws -> Cluster {
        let bin = try binFolder()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kiosk-pg-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let asRoot = getuid() == 0
        if asRoot {
            guard let user = getpwnam("postgres") else {
                throw TestServiceError("running as root, and there is no postgres user to run PostgreSQL as; install the postgresql package")
            }
            chown(folder, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        let asPostgres = asRoot ? ["runuser", "-u", "postgres", "--"] : []
        let data = folder + "/data"
        let (status, output) = try run("/usr/bin/env", asPostgres + [bin + "/initdb", "-D", data, "-U", "kiosk", "--auth=trust", "-E", "UTF8", "--no-sync"])
        guard status == 0 else { throw TestServiceError("initdb failed: \(output)") }

        for _ in 0..<5 {
            let port = try freePort()
            // The watchdog: PostgreSQL runs as its child; when the test process is gone it stops
            // PostgreSQL (by PID) and removes the folder.
            // PostgreSQL's own PID is the first line of postmaster.pid (runuser does not pass signals on).
            let script = """
                \(asPostgres.joined(separator: " ")) \(bin)/postgres -D \(data) -p \(port) -k \(folder) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 > \(folder)/server.log 2>&1 &
                child=$!
                while kill -0 \(getpid()) 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 0.5; done
                kill -INT "$(head -n 1 \(data)/postmaster.pid 2>/dev/null)" 2>/dev/null
                wait $child
                rm -rf \(folder)
                """
            let watchdog = Process()
            watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
            watchdog.arguments = ["-c", script]
            watchdog.standardOutput = FileHandle.nullDevice
            watchdog.standardError = FileHandle.nullDevice
            try watchdog.run()
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, watchdog.isRunning {
                if let pid = (try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8))?.split(separator: "\n").first.flatMap({ Int32($0) }) {
                    let cluster = Cluster(port: port, folder: folder, bin: bin, pid: pid)
                    if (try? psql(cluster, database: "postgres", "SELECT 1")) != nil { return cluster }
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            // Most likely the port was taken between choosing it and binding it: try another.
            watchdog.terminate()
        }
        let log = (try? String(contentsOfFile: folder + "/server.log", encoding: .utf8)) ?? ""
        throw TestServiceError("PostgreSQL did not start: \(log.suffix(500))")
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}

/// A server a test needs (PostgreSQL, nginx) is missing or did not start: what, and what to do.
public struct TestServiceError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
