import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The reader's side of the real channels (issue 45): `kiosk buy` on a store that sells through
/// its web shop, and `kiosk download --play-purchase`, run as the release of `kiosk` is.
@Suite("kiosk buy on the web, kiosk download with a Play purchase")
struct ChannelCommandTests {
    static let book = "com.kiosk.books.small-engines"
    static let secret = "whsec_kiosk_cli_test"

    @Test("with --stripe-secret-key, a production store's kiosk buy prints the Checkout Session Kiosk created on Stripe: no shop of the publisher's needed")
    func stripeCheckout() async throws {
        let stripe = try await StripeStandIn.start()
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, extraArguments: [
            "--environment", "production", "--stripe-webhook-secret", Self.secret,
            "--stripe-secret-key", StripeStandIn.key, "--stripe-api-url", stripe.url,
        ], log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        let bought = try await KioskCommand.run(["buy", Self.book], environment: home)
        #expect(bought.status == 0, "\(bought.stderr)")
        #expect(bought.stdout.hasPrefix("pay for \(Self.book) at:\n  https://checkout.stripe.com/c/pay/cs_test_standin"), "\(bought.stdout)")
        let sent = try #require(try stripe.requests().last)
        #expect(sent.form["metadata[kiosk_product_id]"] == Self.book && sent.form["line_items[0][price_data][unit_amount]"] == "499")
        _ = await server.stop()
        #expect(!server.log.contains(StripeStandIn.key), "the secret key is never logged")
        await stripe.stop()
    }

    @Test("a production store's kiosk buy prints the checkout URL; with --wait it installs the book once the shop's signed event lands")
    func webCheckout() async throws {
        try StripeSigner.requireLibrary()
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, extraArguments: [
            "--environment", "production", "--stripe-webhook-secret", Self.secret,
            "--checkout-url", "https://shop.example/pay?product={product}&account={account}&intent={intent}",
        ], log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        let http = StoreHTTP(baseURL: server.url)

        let first = try await KioskCommand.run(["buy", Self.book], environment: home)
        #expect(first.status == 0, "\(first.stderr)")
        let lines = first.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "pay for \(Self.book) at:", "\(first.stdout)")
        let url = try #require(URLComponents(string: lines.dropFirst().first?.trimmingCharacters(in: .whitespaces) ?? ""))
        #expect(url.host == "shop.example")
        let intent = try #require(url.queryItems?.first { $0.name == "intent" }?.value)
        #expect(first.stdout.contains("delivered by kiosk agent"))
        // --wait is for a web checkout, and --json keeps stdout one document (the URL goes to stderr).
        let notWeb = try await KioskCommand.run(["buy", Self.book, "--payment", "approve", "--wait"], environment: home)
        #expect(notWeb.status != 0 && notWeb.stderr.contains("--wait waits for a payment on the web shop"), "\(notWeb.stderr)")
        let quiet = try await KioskCommand.run(["buy", "com.kiosk.magazines.harbor-monthly.issue-01", "--wait", "--timeout", "1", "--json"], environment: home)
        #expect(quiet.status == 3 && quiet.stderr.contains("https://shop.example/pay?") && !quiet.stdout.contains("shop.example"), "\(quiet.stdout)\(quiet.stderr)")
        // The sandbox's pretend payment is refused by name.
        let pretend = try await KioskCommand.run(["buy", Self.book, "--payment", "approve"], environment: home)
        #expect(pretend.status == 1 && pretend.stderr.contains("sandbox"), "\(pretend.stderr)")

        // A reader waiting; the shop's payment service tells the store the first checkout was paid.
        async let waiting = KioskCommand.run(["buy", Self.book, "--wait", "--timeout", "60"], environment: home)
        try await Task.sleep(for: .seconds(2))
        let event = #"{"data":{"object":{"amount_total":1299,"currency":"eur","id":"cs_cli_1","metadata":{"kiosk_intent":"\#(intent)"},"object":"checkout.session","payment_intent":"pi_cli_1","payment_status":"paid"}},"id":"evt_cli_1","object":"event","type":"checkout.session.completed"}"#
        let delivered = try await http.send("POST", "/v1/stripe/webhook", json: event,
                                            headers: [("Stripe-Signature", try await StripeSigner.header(event, secret: Self.secret))])
        #expect(delivered.status == 200)
        let waited = try await waiting
        #expect(waited.status == 0, "\(waited.stdout)\(waited.stderr)")
        #expect(waited.stdout.contains("waiting for the payment"), "\(waited.stdout)")
        let library = try await KioskCommand.run(["library"], environment: home)
        #expect(library.stdout.contains(Self.book), "\(library.stdout)")
        let open = try await KioskCommand.run(["open", Self.book], environment: home)
        #expect(open.status == 0, "\(open.stderr)")

        // Nobody pays: the wait ends, saying the agent delivers it later.
        let timedOut = try await KioskCommand.run(["buy", "com.kiosk.magazines.harbor-monthly.issue-02", "--wait", "--timeout", "2"], environment: home)
        #expect(timedOut.status == 3, "\(timedOut.stdout)\(timedOut.stderr)")
        #expect(timedOut.stdout.contains("no payment of com.kiosk.magazines.harbor-monthly.issue-02 arrived"), "\(timedOut.stdout)")
        _ = await server.stop()
    }

    @Test("a production store without a checkout page: kiosk buy says where the store sells, saving nothing")
    func productionWithoutCheckout() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, extraArguments: ["--environment", "production", "--stripe-webhook-secret", Self.secret],
                                                   log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        let refused = try await KioskCommand.run(["buy", Self.book], environment: home)
        #expect(refused.status != 0 && refused.stderr.contains("sells only through its web shop"), "\(refused.stderr)")
        let transactions = try await KioskCommand.run(["transactions"], environment: home)
        #expect(!transactions.stdout.contains(Self.book), "\(transactions.stdout)")
        _ = await server.stop()
    }

    @Test("kiosk buy --web on a store without a checkout page says which flag it lacks")
    func webCheckoutNotConfigured() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        let refused = try await KioskCommand.run(["buy", Self.book, "--web"], environment: home)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("--checkout-url"), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1, "one line: \(refused.stderr)")
        _ = await server.stop()
    }

    @Test("kiosk download --play-purchase installs a purchase openssl signed; another account's device is refused; a pending one waits")
    func playPurchase() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editCatalog("books.json") { products in
            for index in products.indices where products[index]["id"] as? String == Self.book { products[index]["playProductId"] = "play.book" }
        }
        try OpenSSL.run(["genrsa", "-out", "play.pem", "2048"], in: directory)
        try OpenSSL.run(["rsa", "-in", "play.pem", "-pubout", "-outform", "DER", "-out", "play.der"], in: directory)
        try Data(try Data(contentsOf: directory.path("play.der")).base64EncodedString().utf8).write(to: directory.path("play.key"))
        func signed(_ name: String, _ json: String) throws -> (String, String) {
            try Data(json.utf8).write(to: directory.path("\(name).json"))
            try OpenSSL.run(["dgst", "-sha1", "-sign", "play.pem", "-out", "\(name).bin", "\(name).json"], in: directory)
            try Data(try Data(contentsOf: directory.path("\(name).bin")).base64EncodedString().utf8).write(to: directory.path("\(name).sig"))
            return (directory.path("\(name).json").path, directory.path("\(name).sig").path)
        }
        let server = try await ServerProcess.start(store, extraArguments: [
            "--play-package-name", "com.example.reader", "--play-public-key", directory.path("play.key").path,
        ], log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]

        let (json, signature) = try signed("bought", #"{"orderId":"GPA.1","packageName":"com.example.reader","productId":"play.book","purchaseTime":1795760000000,"purchaseState":0,"purchaseToken":"tok-cli-1","quantity":1,"acknowledged":false}"#)
        let installed = try await KioskCommand.run(["download", Self.book, "--play-purchase", json, "--play-signature", signature], environment: home)
        #expect(installed.status == 0, "\(installed.stdout)\(installed.stderr)")
        #expect(installed.stdout.contains("purchased \(Self.book)"), "\(installed.stdout)")
        #expect(try await KioskCommand.run(["library"], environment: home).stdout.contains(Self.book))

        let other = ["KIOSK_HOME": directory.path("other").path, "KIOSK_SERVER": server.url]
        let refused = try await KioskCommand.run(["download", Self.book, "--play-purchase", json, "--play-signature", signature], environment: other)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("another account"), "\(refused.stderr)")

        let (pendingJSON, pendingSignature) = try signed("pending", #"{"orderId":"GPA.2","packageName":"com.example.reader","productId":"play.book","purchaseTime":1795760000000,"purchaseState":2,"purchaseToken":"tok-cli-2","quantity":1,"acknowledged":false}"#)
        let pending = try await KioskCommand.run(["download", Self.book, "--play-purchase", pendingJSON, "--play-signature", pendingSignature], environment: other)
        #expect(pending.status == 3, "\(pending.stdout)\(pending.stderr)")
        #expect(pending.stdout.contains("pending at Play"), "\(pending.stdout)")

        let forged = try await KioskCommand.run(["download", Self.book, "--play-purchase", pendingJSON, "--play-signature", signature], environment: other)
        #expect(forged.status == 1 && forged.stderr.contains("signature"), "\(forged.stderr)")
        // A purchase of another product than the one asked for is refused before it is sent.
        let mismatched = try await KioskCommand.run(["download", "com.kiosk.books.river-of-maps", "--play-purchase", json, "--play-signature", signature], environment: other)
        #expect(mismatched.status == 1 && mismatched.stderr.contains("not com.kiosk.books.river-of-maps"), "\(mismatched.stderr)")
        let missing = try await KioskCommand.run(["download", Self.book, "--play-purchase", json], environment: other)
        #expect(missing.status != 0 && missing.stderr.contains("--play-signature"), "\(missing.stderr)")
        _ = await server.stop()
    }
}
