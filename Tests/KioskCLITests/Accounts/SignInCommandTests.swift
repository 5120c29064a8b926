import Foundation
import KioskTestSupport
import Testing

/// `kiosk account create --email`, `kiosk login`, `kiosk logout` and `kiosk devices`: a reader
/// moves to a second device by signing in, not by copying a token.
@Suite("kiosk login, logout and devices")
struct SignInCommandTests: KioskCommandSuite {
    typealias Setup = SyncedHome
    static let book = "com.kiosk.books.small-engines"
    static let password = "correct horse battery"

    /// A second device: a home of its own on the same store.
    static func device(_ setup: Setup, _ name: String) -> [String: String] {
        ["KIOSK_HOME": setup.directory.path(name).path, "KIOSK_SERVER": setup.server.url]
    }

    @Test("a purchase on one device comes back on another that signs in at a terminal, the password never shown; then devices, remove and logout")
    func signInOnSecondDevice() async throws {
        let setup = try await Setup()
        #expect(try await setup.kiosk("buy", Self.book).status == 0)
        let created = try await KioskCommand.run(["account", "create", "--email", "ann@example.com", "--password-stdin", "--name", "laptop"],
                                                 environment: ["KIOSK_HOME": setup.home], input: Self.password + "\n")
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.hasSuffix("signs in with ann@example.com; on another device: kiosk login --email ann@example.com\n"), "\(created.stdout)")

        // The second device signs in at a real terminal: the password is asked for and not echoed.
        let phone = Self.device(setup, "phone")
        let terminal = try TerminalSession(
            "KIOSK_HOME=\(phone["KIOSK_HOME"] ?? "") \(KioskCommand.executable.path) login --email Ann@Example.com --name phone --server \(setup.server.url); sleep 30")
        try await terminal.waitForScreen { $0.contains { $0.contains("password:") } }
        try terminal.send(Self.password, "Enter")
        let screen = try await terminal.waitForScreen { $0.contains { $0.contains("signed in to account") } }
        #expect(screen.contains { $0.contains("signed in to account") && $0.contains("(ann@example.com)") }, "\(screen)")
        #expect(!screen.joined().contains(Self.password), "the password was echoed: \(screen)")

        let restored = try await KioskCommand.run(["restore"], environment: phone)
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(try await KioskCommand.run(["library", "--json"], environment: phone).stdout.contains(Self.book))
        let listed = try await KioskCommand.run(["devices"], environment: phone)
        #expect(listed.stdout.hasPrefix("2 of at most 10 devices of ann@example.com\n"), "\(listed.stdout)")
        #expect(listed.stdout.contains("* phone  dev_") && listed.stdout.contains("(this device)"))
        #expect(listed.stdout.contains("  laptop  dev_"))

        // Removed from the laptop, the phone is refused at once, in one line saying what to do.
        let removed = try await setup.kiosk("devices", "remove", "phone")
        #expect(removed.status == 0, "\(removed.stderr)")
        let refused = try await KioskCommand.run(["devices"], environment: phone)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("answered 401") && refused.stderr.contains("kiosk login"), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1)

        // Signing in again works; logout revokes that device's token alone.
        let again = try await KioskCommand.run(["login", "--email", "ann@example.com", "--password-stdin", "--name", "phone"], environment: phone, input: Self.password + "\n")
        #expect(again.status == 0, "\(again.stderr)")
        let logout = try await KioskCommand.run(["logout"], environment: phone)
        #expect(logout.stdout.hasPrefix("signed out of account acct_"), "\(logout.stdout) \(logout.stderr)")
        #expect(try await KioskCommand.run(["logout"], environment: phone).stdout == "this device is not signed in; nothing to do\n")
        let left = try await setup.kiosk("devices", "--json")
        let devices = try #require((try JSONSerialization.jsonObject(with: Data(left.stdout.utf8)) as? [String: Any])?["devices"] as? [[String: Any]])
        #expect(devices.map { $0["name"] as? String } == ["laptop"])
    }

    @Test("a device signs in with a code another device approves; a wrong password or no terminal gets one clear line")
    func codeAndRefusals() async throws {
        let setup = try await Setup()
        let created = try await KioskCommand.run(["account", "create", "--email", "bo@example.com", "--password-stdin"],
                                                 environment: ["KIOSK_HOME": setup.home], input: Self.password + "\n")
        #expect(created.status == 0, "\(created.stderr)")

        let tv = Self.device(setup, "tv")
        let terminal = try TerminalSession(
            "KIOSK_HOME=\(tv["KIOSK_HOME"] ?? "") \(KioskCommand.executable.path) login --code --name tv --server \(setup.server.url); sleep 30")
        let shown = try await terminal.waitForScreen { $0.contains { $0.contains("enter the code") } }
        let line = try #require(shown.first { $0.contains("enter the code") })
        let code = try #require(line.split(separator: " ").first { $0.count == 9 && $0.contains("-") }.map(String.init), "\(line)")
        let approved = try await setup.kiosk("devices", "approve", code.lowercased())
        #expect(approved.stdout == "approved: tv signs in to this account at its next poll\n", "\(approved.stderr)")
        let done = try await terminal.waitForScreen { $0.contains { $0.contains("signed in to account") } }
        #expect(done.contains { $0.contains("(bo@example.com)") }, "\(done)")
        #expect(try await KioskCommand.run(["devices", "approve", code], environment: ["KIOSK_HOME": setup.home]).status == 1)

        let wrong = try await KioskCommand.run(["login", "--email", "bo@example.com", "--password-stdin"], environment: Self.device(setup, "other"), input: "not the password\n")
        #expect(wrong.status == 1)
        #expect(wrong.stderr.hasSuffix("answered 401: the email or the password is wrong; check both\n"), "\(wrong.stderr)")
        let noTerminal = try await KioskCommand.run(["login", "--email", "bo@example.com"], environment: Self.device(setup, "other"), input: "")
        #expect(noTerminal.status != 0)
        #expect(noTerminal.stderr.contains("send it with --password-stdin"), "\(noTerminal.stderr)")
        let short = try await KioskCommand.run(["account", "create", "--email", "cy@example.com", "--password-stdin"], environment: Self.device(setup, "third"), input: "short\n")
        #expect(short.stderr.contains("use at least 8"), "\(short.stderr)")
    }

    @Test("Ctrl-C at the password prompt ends the command at once and leaves the terminal echoing; logout keeps an anonymous account's purchases unless --force")
    func interruptsAndStrandedPurchases() async throws {
        let setup = try await Setup()
        let other = Self.device(setup, "other")
        let terminal = try TerminalSession(
            "KIOSK_HOME=\(other["KIOSK_HOME"] ?? "") \(KioskCommand.executable.path) login --email bo@example.com --server \(setup.server.url); echo \"exit $?\"; stty -a | tr ' ' '\\n' | grep -x -- '-*echo'; sleep 30")
        try await terminal.waitForScreen { $0.contains { $0.contains("password:") } }
        try terminal.send("abc")
        try terminal.send("C-c")
        let screen = try await terminal.waitForScreen(timeout: .seconds(10)) { lines in lines.contains { $0 == "echo" || $0 == "-echo" } }
        #expect(screen.contains { $0.contains("interrupted") }, "\(screen)")
        #expect(screen.contains("echo") && !screen.contains("-echo"), "the terminal was left without echo: \(screen)")

        #expect(try await setup.kiosk("buy", Self.book).status == 0)
        let refused = try await setup.kiosk("logout")
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("has no sign-in and owns 1 purchase(s)"), "\(refused.stderr)")
        #expect(try await setup.kiosk("account").status == 0, "the refused logout kept the account")
        let forced = try await setup.kiosk("logout", "--force")
        #expect(forced.status == 0, "\(forced.stderr)")
    }

    @Test("signing in again on a device already signed in to that account replaces its own session, even at the device limit")
    func signInAgainAtTheLimit() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, extraArguments: ["--max-devices", "1"], log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        let created = try await KioskCommand.run(["account", "create", "--email", "ann@example.com", "--password-stdin"], environment: home, input: Self.password + "\n")
        #expect(created.status == 0, "\(created.stderr)")
        let again = try await KioskCommand.run(["login", "--email", "Ann@example.com", "--password-stdin"], environment: home, input: Self.password + "\n")
        #expect(again.status == 0, "\(again.stderr)")
        let listed = try await KioskCommand.run(["devices"], environment: home)
        #expect(listed.stdout.hasPrefix("1 of at most 1 devices"), "\(listed.stdout)\(listed.stderr)")
        // Another device at the limit is told which device to remove.
        let other = ["KIOSK_HOME": directory.path("other").path, "KIOSK_SERVER": server.url]
        let refused = try await KioskCommand.run(["login", "--email", "ann@example.com", "--password-stdin"], environment: other, input: Self.password + "\n")
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("device_limit") || refused.stderr.contains("the most it may have"), "\(refused.stderr)")
        _ = await server.stop()
    }
}
