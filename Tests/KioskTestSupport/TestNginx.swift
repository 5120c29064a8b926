import Foundation

/// A real nginx started from the repository's own `deploy/nginx.conf`, with only its ports,
/// folders and secret substituted, in the foreground (`daemon off`), and stopped by PID.
public final class TestNginx: Sendable {
    public let port: Int
    public let folder: TemporaryDirectory
    private let process: Process

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// The deployment config as shipped.
    public static var deployConfig: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("deploy/nginx.conf")
    }

    /// Starts nginx on a free port of 127.0.0.1 in front of `upstreams` (host:port of Kiosk
    /// instances), serving the archives of the published folder `published`.
    /// - Throws: ``TestServiceError`` naming what is missing when nginx is not installed.
    public static func start(upstreams: [String], published: URL, secret: String) async throws -> TestNginx {
        let binary = "/usr/sbin/nginx"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw TestServiceError("nginx is not installed (no \(binary)); run `make test`, which installs it with apt-get install nginx")
        }
        let folder = try TemporaryDirectory()
        for temporary in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            try FileManager.default.createDirectory(at: folder.path(temporary), withIntermediateDirectories: true)
        }
        var lastError = ""
        for _ in 0..<5 {
            let port = try TestPostgres.freePort()
            let config = try render(port: port, upstreams: upstreams, published: published, secret: secret, folder: folder.url)
            let file = folder.path("nginx.conf")
            try Data(config.utf8).write(to: file)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["-c", file.path, "-p", folder.url.path, "-e", folder.path("error.log").path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.runAlone()
            let nginx = TestNginx(port: port, folder: folder, process: process)
            for _ in 0..<100 where process.isRunning {
                if Self.accepts(port: port) { return nginx }
                try await Task.sleep(for: .milliseconds(50))
            }
            lastError = (try? String(contentsOf: folder.path("error.log"), encoding: .utf8)) ?? ""
            nginx.stop()
        }
        throw TestServiceError("nginx did not start: \(lastError.suffix(500))")
    }

    private init(port: Int, folder: TemporaryDirectory, process: Process) {
        self.port = port
        self.folder = folder
        self.process = process
    }

    /// Stops nginx (SIGQUIT to its master, by PID: a graceful stop) and waits for it.
    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGQUIT)
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitForExit()
    }

    /// Each access log line: `"GET /path HTTP/1.1" status bytes`.
    public func accessLog() -> [String] {
        ((try? String(contentsOf: folder.path("access.log"), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Runs `body` with nginx started, and stops nginx whatever happens.
    public static func with<T: Sendable>(
        upstreams: [String], published: URL, secret: String, _ body: @Sendable (TestNginx) async throws -> T
    ) async throws -> T {
        let nginx = try await start(upstreams: upstreams, published: published, secret: secret)
        do {
            let result = try await body(nginx)
            nginx.stop()
            return result
        } catch {
            nginx.stop()
            throw error
        }
    }

    static func render(port: Int, upstreams: [String], published: URL, secret: String, folder: URL) throws -> String {
        var config = try String(contentsOf: deployConfig, encoding: .utf8)
        func replace(_ old: String, _ new: String) throws {
            guard config.contains(old) else { throw TestServiceError("deploy/nginx.conf no longer contains \"\(old)\"; update TestNginx") }
            config = config.replacingOccurrences(of: old, with: new)
        }
        try replace("user www-data;", getuid() == 0 ? "user root;" : "")
        try replace("pid /run/kiosk-nginx.pid;", "daemon off;\npid \(folder.path)/nginx.pid;")
        try replace("/var/log/nginx/kiosk-error.log", "\(folder.path)/error.log")
        try replace("/var/log/nginx/kiosk-access.log", "\(folder.path)/access.log")
        try replace("/var/lib/nginx/", "\(folder.path)/")
        try replace("listen 8080;", "listen 127.0.0.1:\(port);")
        try replace("        server 127.0.0.1:8081 max_fails=2 fail_timeout=5s;    # CHANGE: your instances\n        server 127.0.0.1:8082 max_fails=2 fail_timeout=5s;\n",
                    upstreams.map { "        server \($0) max_fails=2 fail_timeout=5s;\n" }.joined())
        try replace("/srv/kiosk/published/", published.path + "/")
        try replace("CHANGE-ME-SECRET", secret)
        return config
    }

    static func accepts(port: Int) -> Bool {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
