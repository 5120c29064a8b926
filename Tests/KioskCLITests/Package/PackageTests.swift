import Foundation
import KioskTestSupport
import Testing

/// `make package`'s Debian package, made by `scripts/package.sh` from this build's own `kiosk` and
/// `kiosk-server` (the debug binaries beside the test bundle, so no release build is needed):
/// lintian's verdict, the files it installs, its postinst, and the store started from the
/// packaged unit's own ExecStart line.
///
/// Nothing is installed on this machine: the package is unpacked (`dpkg-deb -x`) into a throwaway
/// root. `dpkg -i --root` would run the maintainer scripts chrooted into that root (which has no
/// shell, adduser or systemd-sysusers) or, with --force-script-chrootless, against this machine's
/// own user database. So postinst is run on its own with every command it may call replaced by a
/// stub that records its arguments (PATH holds the stubs alone: no real program runs), and the
/// packaged sysusers.d file is given to the real `systemd-sysusers --root`, which writes the user
/// into the throwaway root's /etc/passwd, never this machine's.
@Suite("The Debian package: lintian, its files, its postinst, the store from its unit")
struct PackageTests {
    static let repository = SampleStore.repository
    /// dpkg-deb, lintian and systemd-sysusers: Debian's own judges of a package (make test-tools).
    static let tools = ["/usr/bin/dpkg-deb", "/usr/bin/lintian", "/usr/bin/dpkg-shlibdeps", "/usr/bin/systemd-sysusers"]

    @Test("scripts/package.sh packages this build: no lintian error, the layout of an installed kiosk, a postinst that makes the kiosk user and owners, and kiosk@.service's ExecStart serving /healthz")
    func package() async throws {
        for tool in Self.tools {
            try #require(FileManager.default.isExecutableFile(atPath: tool),
                         "\(tool) is missing: run make test-tools (it installs dpkg-dev, lintian and systemd)")
        }
        let started = ContinuousClock.now
        let directory = try TemporaryDirectory()
        let binaries = KioskCommand.executable.deletingLastPathComponent()
        let out = directory.path("out")

        // The package, compressed lightly (xz takes a minute on 2 cores; make package uses it).
        let made = try await offCooperativePool {
            try ToolProcess.run("/bin/bash", [Self.repository.appendingPathComponent("scripts/package.sh").path,
                                              "--bin", binaries.path, "--out", out.path, "--compress", "gzip", "--level", "1"])
        }
        try #require(made.status == 0, "scripts/package.sh failed: \(made.output)")
        let deb = made.output.split(separator: "\n").last.map(String.init) ?? ""
        let version = try Self.sourceVersion()
        let architecture = try Self.architecture()
        #expect(deb == out.appendingPathComponent("kiosk_\(version)_\(architecture).deb").path, "the last line names the package: \(made.output)")
        try #require(FileManager.default.fileExists(atPath: deb), "no package at \(deb): \(made.output)")
        let stage = try FileManager.default.contentsOfDirectory(atPath: out.path).filter { $0.hasPrefix("stage.") }
        #expect(stage.isEmpty, "the staging tree was left behind: \(stage)")

        // lintian runs meanwhile (it takes about as long as the rest of the test).
        async let lintian = offCooperativePool {
            // The one tag suppressed: these are the debug binaries, whose RUNPATH names the
            // toolchain's Swift runtime (/opt/swift/…). The release build links that runtime
            // statically and has no RUNPATH; make package runs lintian on it with no tag suppressed.
            // lintian leaves a file in TMPDIR at every run (Lintian::Storage::MLDBM's mldbm-elf-*):
            // it gets a folder of this test's, removed with it.
            let scratch = directory.path("lintian-tmp")
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            return try ToolProcess.run("/usr/bin/env", ["TMPDIR=\(scratch.path)", "/usr/bin/lintian", "--suppress-tags", "custom-library-search-path", deb])
        }

        let root = directory.path("root")
        try await Self.checkLayout(deb: deb, root: root, version: version, binaries: binaries)
        try await Self.checkPostinst(deb: deb, directory: directory)
        try await Self.checkSysusers(root: root)
        try await Self.serveFromUnit(root: root, directory: directory)

        let lint = try await lintian
        let errors = lint.output.split(separator: "\n").filter { $0.hasPrefix("E: ") }
        #expect(errors.isEmpty, "lintian found errors:\n\(errors.joined(separator: "\n"))\n\(lint.output)")
        #expect(lint.status == 0, "lintian exited \(lint.status): \(lint.output)")
        let took = ContinuousClock.now - started
        print("PackageTests: packaged, linted, unpacked, served in \(took); lintian said: \(lint.output.split(separator: "\n").filter { !$0.contains("root privileges") })")
    }

    /// ProgramVersion.number, read from the source as scripts/package.sh reads it.
    static func sourceVersion() throws -> String {
        let source = try String(contentsOf: repository.appendingPathComponent("Sources/KioskCommandLine/ProgramVersion.swift"), encoding: .utf8)
        guard let line = source.split(separator: "\n").first(where: { $0.contains("static let number = \"") }),
              let value = line.split(separator: "\"").dropFirst().first else {
            throw PackageTestError("no `static let number = \"…\"` in ProgramVersion.swift")
        }
        return String(value)
    }

    static func architecture() throws -> String {
        try ToolProcess.run("/usr/bin/dpkg", ["--print-architecture"]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Unpacks the package into `root` and checks what it installs, and its control files.
    static func checkLayout(deb: String, root: URL, version: String, binaries: URL) async throws {
        let unpacked = try await offCooperativePool { try ToolProcess.run("/usr/bin/dpkg-deb", ["-x", deb, root.path]) }
        try #require(unpacked.status == 0, "dpkg-deb -x failed: \(unpacked.output)")
        let fields = try await offCooperativePool { try ToolProcess.run("/usr/bin/dpkg-deb", ["-f", deb]) }
        #expect(fields.output.contains("Package: kiosk\n") && fields.output.contains("Version: \(version)\n"), "\(fields.output)")
        let depends = fields.output.split(separator: "\n").first { $0.hasPrefix("Depends: ") } ?? ""
        // adduser (postinst's fallback); libarchive13, which the programs dlopen (no ELF header names it).
        for package in ["adduser", "libarchive13", "libc6", "libcurl4"] {
            #expect(depends.contains(package), "Depends lacks \(package): \(depends)")
        }
        let contents = try await offCooperativePool { try ToolProcess.run("/usr/bin/dpkg-deb", ["-c", deb]) }
        let notRoot = contents.output.split(separator: "\n").filter { !$0.contains(" root/root ") }
        #expect(notRoot.isEmpty, "every file belongs to root (dpkg-deb --root-owner-group): \(notRoot)")

        let files = FileManager.default
        func mode(_ path: String) -> Int? {
            (try? files.attributesOfItem(atPath: root.appendingPathComponent(path).path))?[.posixPermissions] as? Int
        }
        func text(_ path: String) -> String {
            (try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)) ?? ""
        }
        for program in ["kiosk", "kiosk-server"] {
            let installed = root.appendingPathComponent("usr/bin/\(program)")
            #expect(mode("usr/bin/\(program)") == 0o755, "/usr/bin/\(program): \(String(mode("usr/bin/\(program)") ?? 0, radix: 8))")
            #expect(files.isExecutableFile(atPath: installed.path))
            // Stripped: smaller than the build's own, which keeps its symbols.
            let size = { (url: URL) in (try? files.attributesOfItem(atPath: url.path))?[.size] as? Int ?? 0 }
            #expect(size(installed) > 0 && size(installed) < size(binaries.appendingPathComponent(program)), "\(program) was not stripped")
            let said = try await offCooperativePool { try ToolProcess.run(installed.path, ["--version"]) }
            #expect(said.status == 0 && said.output.hasPrefix("\(program) \(version) "), "\(said.output)")
        }

        let service = text("usr/lib/systemd/system/kiosk@.service")
        #expect(service.contains("\nEnvironmentFile=/etc/kiosk/kiosk.env\n") && service.contains("\nUser=kiosk\n"), "\(service)")
        #expect(service.contains("\nExecStart=/usr/bin/kiosk-server serve "), "\(service)")
        #expect(service.contains("\nStateDirectory=kiosk\n") && service.contains("--data /var/lib/kiosk"), "\(service)")
        #expect(!service.contains("/usr/local"), "the packaged unit names /usr/local: \(service)")
        let agent = text("usr/lib/systemd/user/kiosk-agent.service")
        #expect(agent.contains("\nExecStart=/usr/bin/kiosk agent"), "\(agent)")
        #expect(!agent.contains(".local/bin"), "\(agent)")

        // The settings: a conffile, readable by root and (after postinst) group kiosk only.
        let settings = text("etc/kiosk/kiosk.env")
        #expect(mode("etc/kiosk/kiosk.env") == 0o640, "kiosk.env: \(String(mode("etc/kiosk/kiosk.env") ?? 0, radix: 8))")
        #expect(settings.contains("#KIOSK_CATALOG=") && settings.contains("#KIOSK_PUBLISHED=") && settings.contains("#KIOSK_DATABASE="), "\(settings)")
        let control = root.deletingLastPathComponent().appendingPathComponent("control")
        let extracted = try await offCooperativePool { try ToolProcess.run("/usr/bin/dpkg-deb", ["-e", deb, control.path]) }
        try #require(extracted.status == 0, "dpkg-deb -e failed: \(extracted.output)")
        let conffiles = (try? String(contentsOf: control.appendingPathComponent("conffiles"), encoding: .utf8)) ?? ""
        #expect(conffiles.split(separator: "\n").contains("/etc/kiosk/kiosk.env"), "conffiles: \(conffiles)")
        for script in ["postinst", "prerm", "postrm"] {
            #expect(files.isExecutableFile(atPath: control.appendingPathComponent(script).path), "no executable \(script)")
            let syntax = try await offCooperativePool { try ToolProcess.run("/bin/sh", ["-n", control.appendingPathComponent(script).path]) }
            #expect(syntax.status == 0, "\(script): \(syntax.output)")
        }

        // The data folder, the kiosk user's declaration, the pages and what lintian asks for.
        var isFolder: ObjCBool = false
        #expect(files.fileExists(atPath: root.appendingPathComponent("var/lib/kiosk").path, isDirectory: &isFolder) && isFolder.boolValue)
        #expect(mode("var/lib/kiosk") == 0o700, "/var/lib/kiosk: \(String(mode("var/lib/kiosk") ?? 0, radix: 8))")
        #expect(text("usr/lib/sysusers.d/kiosk.conf").contains("\nu kiosk - "), "\(text("usr/lib/sysusers.d/kiosk.conf"))")
        for path in ["usr/share/man/man1/kiosk.1.gz", "usr/share/man/man1/kiosk-server.1.gz", "usr/share/doc/kiosk/copyright",
                     "usr/share/doc/kiosk/changelog.gz", "usr/share/lintian/overrides/kiosk"] {
            #expect(files.fileExists(atPath: root.appendingPathComponent(path).path), "no /\(path)")
        }
        #expect(text("usr/share/doc/kiosk/copyright").hasPrefix("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"))
    }

    /// postinst configure, twice, with stubs for every command it may call: once where
    /// systemd-sysusers is, once where only adduser is.
    static func checkPostinst(deb: String, directory: TemporaryDirectory) async throws {
        let postinst = directory.path("control/postinst").path
        for sysusers in [true, false] {
            let stubs = directory.path(sysusers ? "stubs-sysusers" : "stubs-adduser")
            let log = stubs.appendingPathComponent("calls.log")
            var commands = ["adduser", "chown", "chmod", "systemctl", "deb-systemd-invoke", "deb-systemd-helper"]
            if sysusers { commands.append("systemd-sysusers") }
            for command in commands {
                try directory.write("\(stubs.lastPathComponent)/\(command)", "#!/bin/sh\necho \"\(command) $*\" >> \"$STUB_LOG\"\n")
            }
            // No statoverride: postinst sets the owners itself.
            try directory.write("\(stubs.lastPathComponent)/dpkg-statoverride", "#!/bin/sh\necho \"dpkg-statoverride $*\" >> \"$STUB_LOG\"\nexit 1\n")
            for stub in try FileManager.default.contentsOfDirectory(atPath: stubs.path) {
                try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: stubs.appendingPathComponent(stub).path)
            }
            let ran = try await offCooperativePool {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = [postinst, "configure", ""]
                process.environment = ["PATH": stubs.path, "STUB_LOG": log.path]
                let pipe = Pipe()
                process.standardOutput = pipe
                process.standardError = pipe
                try process.runAlone()
                let output = pipe.fileHandleForReading.readDataToEndOfFile()
                let status = process.waitForExit(seconds: 30)
                return (status, String(decoding: output, as: UTF8.self))
            }
            let calls = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            #expect(ran.0 == 0, "postinst configure exited \(ran.0): \(ran.1) calls: \(calls)")
            let user = sysusers ? "systemd-sysusers kiosk.conf" : "adduser --system --group --quiet --home /var/lib/kiosk --no-create-home kiosk"
            #expect(calls.first == user, "the kiosk user comes first (sysusers: \(sysusers)): \(calls)")
            #expect(!calls.contains { $0.hasPrefix(sysusers ? "adduser" : "systemd-sysusers") }, "\(calls)")
            for call in ["chown root:kiosk /etc/kiosk/kiosk.env", "chmod 0640 /etc/kiosk/kiosk.env", "chown kiosk:kiosk /var/lib/kiosk", "chmod 0700 /var/lib/kiosk"] {
                #expect(calls.contains(call), "postinst did not \(call): \(calls)")
            }
            #expect(!calls.contains { $0.contains(" start ") || $0.contains(" enable ") }, "postinst starts or enables nothing: \(calls)")
        }
    }

    /// The packaged sysusers.d file, given to the real systemd-sysusers on the throwaway root.
    static func checkSysusers(root: URL) async throws {
        let made = try await offCooperativePool { try ToolProcess.run("/usr/bin/systemd-sysusers", ["--root=\(root.path)", "kiosk.conf"]) }
        #expect(made.status == 0, "systemd-sysusers --root failed: \(made.output)")
        let passwd = (try? String(contentsOf: root.appendingPathComponent("etc/passwd"), encoding: .utf8)) ?? ""
        let kiosk = passwd.split(separator: "\n").first { $0.hasPrefix("kiosk:") }.map { $0.split(separator: ":", omittingEmptySubsequences: false) } ?? []
        #expect(kiosk.count == 7 && kiosk[5] == "/var/lib/kiosk" && kiosk[6].hasSuffix("/nologin"), "the kiosk user in the root's /etc/passwd: \(passwd)")
        if kiosk.count == 7, let uid = Int(kiosk[2]) { #expect(uid < 1000, "kiosk is a system user: \(kiosk)") }
        let group = (try? String(contentsOf: root.appendingPathComponent("etc/group"), encoding: .utf8)) ?? ""
        #expect(group.contains("\nkiosk:") || group.hasPrefix("kiosk:"), "\(group)")
    }

    /// The store started as systemd would start kiosk@PORT: the unit's ExecStart with /usr/bin and
    /// /var/lib/kiosk mapped into the throwaway root, the environment from its EnvironmentFile (the
    /// packaged sample, with its catalog and content lines filled in, as an operator would).
    static func serveFromUnit(root: URL, directory: TemporaryDirectory) async throws {
        let unit = try String(contentsOf: root.appendingPathComponent("usr/lib/systemd/system/kiosk@.service"), encoding: .utf8)
        let lines = unit.split(separator: "\n").map(String.init)
        let execStart = try #require(lines.first { $0.hasPrefix("ExecStart=") }, "no ExecStart in kiosk@.service")
        let environmentFile = try #require(lines.first { $0.hasPrefix("EnvironmentFile=") }, "no EnvironmentFile in kiosk@.service")
        let command = String(execStart.dropFirst("ExecStart=".count))
        try #require(!command.contains("\"") && !command.contains("'") && !"-@+!:".contains(command.first ?? " "),
                     "ExecStart uses quoting or prefixes this test does not map: \(command)")
        let port = try freeInstancePort()
        let mapped = command.split(separator: " ").map { word -> String in
            let word = word.replacingOccurrences(of: "%i", with: String(port))
            return word.hasPrefix("/usr/") || word.hasPrefix("/var/") ? root.path + word : word
        }
        #expect(!mapped.contains { $0.contains("%") }, "ExecStart has a specifier left: \(mapped)")
        try #require(mapped.first == root.path + "/usr/bin/kiosk-server", "\(mapped)")
        let data = root.appendingPathComponent("var/lib/kiosk")
        #expect(mapped.contains(data.path), "--data maps into the root: \(mapped)")

        // The EnvironmentFile, as the operator fills it in, read as systemd reads it.
        let store = try SampleStore(in: directory)
        let settingsFile = root.path + String(environmentFile.dropFirst("EnvironmentFile=".count))
        var settings = try String(contentsOfFile: settingsFile, encoding: .utf8)
        settings = settings.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            if line.hasPrefix("#KIOSK_CATALOG=") { return "KIOSK_CATALOG=\(store.catalog.path)" }
            if line.hasPrefix("#KIOSK_CONTENT=") { return "KIOSK_CONTENT=\(store.content.path)" }
            return String(line)
        }.joined(separator: "\n")
        try settings.write(toFile: settingsFile, atomically: false, encoding: .utf8)
        var environment = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": FileManager.default.temporaryDirectory.path]
        for line in settings.split(separator: "\n") where !line.hasPrefix("#") && line.contains("=") {
            let parts = line.split(separator: "=", maxSplits: 1)
            environment[String(parts[0]).trimmingCharacters(in: .whitespaces)] = parts.count > 1 ? String(parts[1]) : ""
        }
        #expect(environment["KIOSK_CATALOG"] == store.catalog.path && environment["KIOSK_CONTENT"] == store.content.path, "\(environment)")

        let log = directory.path("server.log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: mapped[0])
        server.arguments = Array(mapped.dropFirst())
        server.environment = environment
        server.currentDirectoryURL = URL(fileURLWithPath: "/")
        let stdout = Pipe()
        server.standardOutput = stdout
        server.standardError = try FileHandle(forWritingTo: log)
        try server.runAlone()
        defer {
            if server.isRunning {
                kill(server.processIdentifier, SIGKILL)
                server.waitForExit(seconds: 10)
            }
        }
        let serverLog = { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        let line = try await offCooperativePool { () -> String in
            // A server that neither listens nor exits within 60 seconds is killed, so the read ends.
            let watchdog = DispatchWorkItem { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
            DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
            defer { watchdog.cancel() }
            var bytes = Data()
            while true {
                let byte = stdout.fileHandleForReading.readData(ofLength: 1)
                if byte.isEmpty || byte == Data("\n".utf8) { break }
                bytes.append(byte)
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        try #require(line == "listening on http://127.0.0.1:\(port)", "the store did not start from ExecStart \(mapped): stdout \(line); stderr \(serverLog())")
        let url = String(line.dropFirst("listening on ".count))
        let health = try await StoreHTTP(baseURL: url).send("GET", "/healthz")
        #expect(health.status == 200 && String(decoding: health.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "ok",
                "GET /healthz: \(health.status) \(String(decoding: health.body, as: UTF8.self))")
        // The data went where --data sends it: the root's /var/lib/kiosk.
        #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent("admin-token").path),
                "no admin-token in \(data.path): \((try? FileManager.default.contentsOfDirectory(atPath: data.path)) ?? [])")

        kill(server.processIdentifier, SIGTERM)
        let status = try await offCooperativePool { server.waitForExit(seconds: 30) }
        #expect(status == 0 && server.terminationReason == .exit, "after SIGTERM the store exited \(status) (\(server.terminationReason == .exit ? "exit" : "signal")): \(serverLog())")
    }

    /// A free port for the instance, within 1024–5535 so that its metrics port (1 before it,
    /// `--metrics-port 1%i`) is a port too and free as well.
    static func freeInstancePort() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 2000...5535)
            if canBind(port), canBind(Int("1\(port)")!) { return port }
        }
        throw PackageTestError("no free port P with 1P free too in 2000–5535")
    }

    static func canBind(_ port: Int) -> Bool {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } } == 0
    }
}

struct PackageTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
