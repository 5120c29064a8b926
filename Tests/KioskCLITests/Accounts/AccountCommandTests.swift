import Foundation
import GRDB
import KioskTestSupport
import Testing

/// `kiosk account`: the device's account, its token, and linking another device to it.
@Suite("kiosk account and kiosk account link")
struct AccountCommandTests: KioskCommandSuite {
    typealias Setup = SyncedHome
    static let pack5 = "com.kiosk.credits.pack-5"

    @Test("account hides the token unless --show-token, creates nothing by looking, and link names what it replaces and wants --force over purchases")
    func account() async throws {
        let setup = try await Setup()
        let look = try await setup.kiosk("account")
        #expect(look.status == 0, "\(look.stderr)")
        #expect(look.stdout == "no account on this device yet; the first purchase creates one (or use an existing one with kiosk account link TOKEN)\n")
        #expect(try await setup.kiosk("balance").stdout == "0 credits\n")
        #expect(try await Self.admin(setup, "accounts", "--json").stdout == "[]\n")

        #expect(try await setup.kiosk("buy", Self.pack5).status == 0)
        let shown = try await setup.kiosk("account")
        #expect(!shown.stdout.contains("token: ") || shown.stdout.contains("token: hidden (kiosk account --show-token prints it)\n"))
        let account = try #require(shown.stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) })
        let withToken = try await setup.kiosk("account", "--show-token")
        let token = try #require(withToken.stdout.split(separator: "\n").first { $0.hasPrefix("token: ") }.map { String($0.dropFirst("token: ".count).prefix(64)) })
        #expect(withToken.stdout.contains("token: \(token)  (link another device with `kiosk account link TOKEN`)\n"))
        let document = try Self.json(try await setup.kiosk("account", "--json").stdout)
        #expect(Set(document.keys) == ["accountId", "credits", "owned", "subscriptions"] && document["credits"] as? Int == 5)
        #expect(try Self.json(try await setup.kiosk("balance", "--json").stdout) as NSDictionary == ["accountId": account, "credits": 5] as NSDictionary)

        // A second device that bought credits of its own.
        let second = ["KIOSK_HOME": setup.directory.path("second").path]
        #expect(try await KioskCommand.run(["buy", Self.pack5, "--server", setup.server.url], environment: second).status == 0)
        let own = try #require(try await KioskCommand.run(["account"], environment: second).stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) })
        let refused = try await KioskCommand.run(["account", "link", token], environment: second)
        #expect(refused.status == 1)
        #expect(refused.stderr == "kiosk: this device's account \(own) owns 0 purchase(s) and 5 credits, which this device would no longer reach; give it a sign-in first (kiosk account create --email EMAIL) or keep its token (kiosk account --show-token), then use --force\n")
        let forced = try await KioskCommand.run(["account", "link", token, "--force"], environment: second)
        #expect(forced.status == 0, "\(forced.stderr)")
        #expect(forced.stdout == "linked to account \(account), replacing account \(own) on this device (which owns 0 purchase(s) and 5 credits); run `kiosk restore` to bring back its purchases\n")
        #expect(try await KioskCommand.run(["account", "link", token], environment: second).stdout == "this device already uses account \(account); nothing changed\n")
    }
}
