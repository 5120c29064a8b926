import Foundation
import KioskCore
@testable import KioskServer
import KioskStore
import KioskTestSupport
import KioskTransfer
import Testing

/// The shop at the store's own address, over the wire: the public pages (the same for everyone,
/// cached by ETag), the reader's library with its downloads, and buying from a product's page.
@Suite("The shop's pages")
struct ShopPagesTests: StoreSuite {
    static let epub = "com.kiosk.books.salt-and-stars"
    static let hostile = #"<script>alert(1)</script> & "Q's""#

    @Test("the front page, a product, a series, a subject and a search show what is on sale; a page answers 304 to its ETag, and every page forbids script and inline style")
    func publicPages() async throws {
        try await Self.withStore(prepare: { store in
            try store.editCatalog("books.json") { products in
                products[0]["title"] = Self.hostile
                products[1]["forSale"] = false
            }
        }) { _, http, _ in
            let front = try await http.send("GET", "/")
            #expect(front.status == 200)
            let html = String(decoding: front.body, as: UTF8.self)
            for shown in ["New books", "New issues", "Magazines", "Harbor Monthly", "subscribe from 2.49 USD a month", "Salt and Stars", "Wren Calloway", "Free", "Fiction"] {
                #expect(html.contains(shown), "the front page lacks \(shown)")
            }
            // A title is text, never markup.
            #expect(!html.contains("<script>"))
            #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;Q&#39;s&quot;"))
            // Off sale: not shown, and its page sends owners to their library.
            #expect(!html.contains("com.kiosk.books.river-of-maps"))
            let withdrawn = try await http.send("GET", "/products/com.kiosk.books.river-of-maps")
            #expect(withdrawn.status == 404)
            #expect(String(decoding: withdrawn.body, as: UTF8.self).contains("/account/library"))
            #expect(try await http.send("GET", "/products/no.such.thing").status == 404)

            let policy = try #require(front.header("Content-Security-Policy"))
            #expect(policy.contains("default-src 'none'") && policy.contains("style-src 'self'") && !policy.contains("unsafe-inline"), "\(policy)")
            #expect(front.header("Cache-Control") == "public, max-age=60")
            let etag = try #require(front.header("ETag"))
            #expect(try await http.send("GET", "/", headers: [("If-None-Match", etag)]).status == 304)
            let style = try await http.send("GET", "/kiosk.css?v=\(PageStyle.version)")
            #expect(style.status == 200 && style.header("Content-Type")?.hasPrefix("text/css") == true)
            #expect(style.header("Cache-Control")?.contains("immutable") == true)
            #expect(try await http.send("GET", "/kiosk.css?v=old").header("Cache-Control") == "no-cache", "only its own version's URL is kept a year")
            // A free book is open access from its page: no account, no payment.
            let free = String(decoding: try await http.send("GET", "/products/com.kiosk.books.tidewater-stories").body, as: UTF8.self)
            #expect(free.contains("href=\"/opds/content/com.kiosk.books.tidewater-stories\"") && free.contains("Download free"))
            #expect(try await http.send("GET", "/opds/content/com.kiosk.books.tidewater-stories").status == 200)

            let book = String(decoding: try await http.send("GET", "/products/\(Self.epub)").body, as: UTF8.self)
            for shown in ["Salt and Stars", "Wren Calloway", "4.99 USD", "EPUB", "English", "Kiosk Sample Press", "href=\"/account/buy/\(Self.epub)\""] {
                #expect(book.contains(shown), "the product page lacks \(shown)")
            }
            let plan = String(decoding: try await http.send("GET", "/products/\(SampleStore.harborMonthly)").body, as: UTF8.self)
            #expect(plan.contains("2.49 USD <span class=\"muted\">a month</span>") && plan.contains("Subscribe") && plan.contains("Harbor Monthly, November 2026"))

            let series = try await http.send("GET", "/series/\(SampleStore.harborSeries)")
            let seriesPage = String(decoding: series.body, as: UTF8.self)
            #expect(series.status == 200 && seriesPage.contains("<h1>Harbor Monthly</h1>") && seriesPage.contains("Subscribe"))
            #expect(try await http.send("GET", "/series/nope").status == 404)
            #expect(String(decoding: try await http.send("GET", "/subjects/Sea%20stories").body, as: UTF8.self).contains("Salt and Stars"))

            let found = String(decoding: try await http.send("GET", "/search?q=HARBOR").body, as: UTF8.self)
            #expect(found.contains("4 found.") && found.contains("value=\"HARBOR\""))
            let hostileSearch = String(decoding: try await http.send("GET", "/search?q=%3Cb%3Ex").body, as: UTF8.self)
            #expect(!hostileSearch.contains("<b>x") && hostileSearch.contains("&lt;b&gt;x"))
        }
    }

    @Test("an address no route knows: a person gets the shop's page saying so, a program the API's JSON error; a handler's own 404 keeps its words")
    func unknownAddress() async throws {
        try await Self.withStore { _, http, _ in
            for path in ["/nothing", "/account/nothing", "/products"] {
                let page = try await http.send("GET", path)
                let html = String(decoding: page.body, as: UTF8.self)
                #expect(page.status == 404 && page.header("Content-Type") == "text/html; charset=utf-8", "\(path): \(page.status)")
                #expect(html.contains("There is no page at this address.") && html.contains("href=\"/\""), "\(path): \(html)")
                #expect(page.header("Content-Security-Policy")?.contains("default-src 'none'") == true)
            }
            let head = try await http.send("HEAD", "/nothing")
            #expect(head.status == 404 && head.body.isEmpty)
            let api = try await http.send("GET", "/v1/nothing")
            #expect(api.status == 404 && api.header("Content-Type") == "application/json" && api.header("X-Content-Type-Options") == "nosniff")
            #expect(try api.decode(APIError.self).code == "not_found")
            // A product the store does not sell: its own words, not the generic page's.
            #expect(String(decoding: try await http.send("GET", "/products/no.such.thing").body, as: UTF8.self).contains("No product no.such.thing"))
        }
    }

    @Test("a list is paged: every product once, in the same order, and a page past the end shows the last")
    func paging() {
        let products = (0..<30).map { Product(id: "b\($0)", kind: .nonConsumable, title: String(format: "Book %02d", $0), summary: "", price: Price(amount: "1.00", currency: "USD")) }
        let shop = Storefront(products: Dictionary(uniqueKeysWithValues: products.map { ($0.id, $0) }))
        let first = Storefront.page(shop.newBooks(), number: 1, size: 24)
        let second = Storefront.page(shop.newBooks(), number: 2, size: 24)
        #expect(first.count == 2 && first.items.count == 24 && second.items.count == 6)
        #expect(Set((first.items + second.items).map(\.id)).count == 30)
        #expect(Storefront.page(shop.newBooks(), number: 9, size: 24).number == 2)
        #expect(Storefront.page([], number: 1, size: 24).count == 1)
    }

    @Test("the library lists what the account owns, each file downloaded whole or by ranges; another account sees none of it", arguments: TestEngine.all)
    func library(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, _ in
            let ann = try await WebSession.account(http, "ann@example.com")
            #expect(try await http.pay(Self.epub, token: ann.token).status == 200)
            #expect(try await http.pay(Self.book, token: ann.token).status == 200)
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/library")
            #expect(browser.landed == "/account/library")

            let library = try await browser.get("/account/library")
            let page = String(decoding: library.body, as: UTF8.self)
            #expect(library.status == 200 && library.header("Cache-Control") == "no-store")
            #expect(page.contains("Salt and Stars") && page.contains("EPUB") && page.contains("/account/library/\(Self.epub)/file"), "\(page)")
            #expect(page.contains("Small Engines") && page.contains("ZIP archive"))
            // The way back to a reading app: the shelf as an opds:// link, and its address.
            let host = String(http.baseURL.dropFirst("http://".count))
            #expect(page.contains("href=\"opds://\(host)/opds/shelf\"") && page.contains("\(http.baseURL)/opds/shelf"), "\(page)")

            let file = try await browser.get("/account/library/\(Self.epub)/file")
            let original = try Data(contentsOf: SampleStore.repository.appendingPathComponent("Content/publications/salt-and-stars.epub"))
            #expect(file.status == 200 && file.body == original, "the download is the publisher's file byte for byte")
            #expect(file.header("Content-Disposition") == "attachment; filename=\"salt-and-stars.epub\"; filename*=UTF-8''salt-and-stars.epub", "\(file.headers)")
            let rest = try await browser.get("/account/library/\(Self.epub)/file", headers: [("Range", "bytes=100-")])
            #expect(rest.status == 206 && rest.body == original.dropFirst(100), "a browser resumes from where it stopped")

            // Another account owns nothing of it; a signed-out browser is asked to sign in.
            _ = try await WebSession.account(http, "bo@example.com")
            let other = try await WebSession.signIn(http, "bo@example.com", next: "/account/library")
            #expect(!String(decoding: try await other.get("/account/library").body, as: UTF8.self).contains("Salt and Stars"))
            let refused = try await other.get("/account/library/\(Self.epub)/file")
            #expect(refused.status == 403 && refused.header("Content-Type")?.hasPrefix("text/html") == true, "a refusal is a page, not the API's JSON")
            #expect(try await http.send("GET", "/account/library/\(Self.epub)/file").status == 401)
            #expect(String(decoding: try await http.send("GET", "/account/library").body, as: UTF8.self).contains("name=\"next\" value=\"/account/library\""))
        }
    }

    @Test("in the sandbox without a web shop, the shop takes the pretend payment: the same form sent twice is one purchase, and the library has it at once", arguments: TestEngine.all)
    func sandboxBuying(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { server, http, _ in
            let ann = try await WebSession.account(http, "ann@example.com")
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/buy/\(Self.pack5)")
            let page = String(decoding: try await browser.get("/account/buy/\(Self.pack5)").body, as: UTF8.self)
            let key = try #require(page.firstMatch(of: /name="key" value="([0-9A-F-]+)"/)?.1)
            for _ in 0..<2 {
                let paid = try await browser.post("/account/buy/\(Self.pack5)", ["csrf": browser.csrf, "key": String(key)])
                #expect(paid.status == 303 && paid.header("Location") == "/account/library")
            }
            #expect(try await http.charges(accountId: ann.accountId, adminToken: server.adminToken) == [499])
            #expect(try await http.send("GET", "/v1/account", token: ann.token).decode(AccountSummary.self).credits == 5)

            #expect(try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf, "key": UUID().uuidString]).status == 303)
            let library = String(decoding: try await browser.get("/account/library").body, as: UTF8.self)
            #expect(library.contains("/account/library/\(Self.epub)/file"))
            let again = String(decoding: try await browser.get("/account/buy/\(Self.epub)").body, as: UTF8.self)
            #expect(again.contains("already") && !again.contains("Pay 4.99"), "a book the account owns offers no payment")
        }
    }

    @Test("a reader with only a browser creates an account on the sign-in page and comes back to the purchase; a taken email, a short password or a stale form is refused on the page", arguments: TestEngine.all)
    func signUp(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine) { _, http, _ in
            let next = "/account/buy/\(Self.epub)"
            let form = try await http.send("GET", next)
            let page = String(decoding: form.body, as: UTF8.self)
            #expect(page.contains("action=\"/account/sign-up\"") && page.contains("Create an account"))
            let cookie = "kiosk_account_csrf=" + (try #require(WebSession.cookies(form)["kiosk_account_csrf"]))
            let token = String(try #require(page.firstMatch(of: /name="csrf" value="([0-9a-f]+)"/)?.1))

            let stale = try await WebSession.post(http, "/account/sign-up", ["csrf": "0000", "next": next, "email": "new@example.com", "password": SignInTests.password], cookie: cookie)
            #expect(stale.status == 403)
            let short = try await WebSession.post(http, "/account/sign-up", ["csrf": token, "next": next, "email": "new@example.com", "password": "short"], cookie: cookie)
            #expect(short.status == 400 && String(decoding: short.body, as: UTF8.self).contains("at least 8"))
            let created = try await WebSession.post(http, "/account/sign-up", ["csrf": token, "next": next, "email": "New@Example.com", "password": SignInTests.password], cookie: cookie)
            #expect(created.status == 303 && created.header("Location") == next, "\(String(decoding: created.body, as: UTF8.self))")
            let session = try #require(WebSession.cookies(created)["kiosk_account"])
            let buying = try await http.send("GET", next, headers: [("Cookie", "kiosk_account=\(session)")])
            #expect(String(decoding: buying.body, as: UTF8.self).contains("Pay 4.99 USD"))
            // The account signs in elsewhere with what it was made with; the email is taken now.
            #expect(try await SignInTests.signIn(http, "new@example.com").status == 201)
            let again = try await WebSession.post(http, "/account/sign-up", ["csrf": token, "next": next, "email": "new@example.com", "password": SignInTests.password], cookie: cookie)
            #expect(again.status == 409 && String(decoding: again.body, as: UTF8.self).contains("new@example.com"), "\(again.status)")
        }
    }

    @Test("a sign-in or a sign-up the limits stop is a page saying when to try again, with Retry-After; a taken email is said in the page's words", arguments: TestEngine.all)
    func limitedOnThePage(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: {
            $0.rateLimits.signInsPerAddress = RateLimit(burst: 2, perSecond: 1.0 / 3600)
        }) { _, http, _ in
            _ = try await WebSession.account(http, "ann@example.com")
            let form = try await http.send("GET", "/account")
            let cookie = "kiosk_account_csrf=" + (try #require(WebSession.cookies(form)["kiosk_account_csrf"]))
            let token = String(try #require(String(decoding: form.body, as: UTF8.self).firstMatch(of: /name="csrf" value="([0-9a-f]+)"/)?.1))
            let taken = try await WebSession.post(http, "/account/sign-up", ["csrf": token, "next": "/account", "email": "ann@example.com", "password": SignInTests.password], cookie: cookie)
            #expect(taken.status == 409 && String(decoding: taken.body, as: UTF8.self).contains("sign in with it above"), "\(String(decoding: taken.body, as: UTF8.self))")
            var last = taken
            for _ in 0..<3 {
                last = try await WebSession.post(http, "/account/sign-in", ["csrf": token, "next": "/account", "email": "ann@example.com", "password": "not the password"], cookie: cookie)
            }
            #expect(last.status == 429 && last.header("Retry-After") != nil && last.header("Content-Type")?.hasPrefix("text/html") == true, "\(last.status) \(last.headers)")
        }
    }

    @Test("buying from a product's page: signed out it signs in first and comes back; the form leads to the checkout, and the library shows the payment waiting", arguments: TestEngine.all)
    func buying(engine: TestEngine) async throws {
        try await Self.withStore(engine: engine, configure: {
            $0.channels.checkout = try? CheckoutURLTemplate("https://pay.example:8443/checkout?intent={intent}&product={product}")
        }) { _, http, _ in
            _ = try await WebSession.account(http, "ann@example.com")
            let signedOut = String(decoding: try await http.send("GET", "/account/buy/\(Self.epub)").body, as: UTF8.self)
            #expect(signedOut.contains("name=\"next\" value=\"/account/buy/\(Self.epub)\""))
            let browser = try await WebSession.signIn(http, "ann@example.com", next: "/account/buy/\(Self.epub)")
            #expect(browser.landed == "/account/buy/\(Self.epub)")

            let page = try await browser.get("/account/buy/\(Self.epub)")
            #expect(String(decoding: page.body, as: UTF8.self).contains("Pay 4.99 USD"))
            // The form's 303 leads to the payment page: the one other address its policy allows.
            #expect(page.header("Content-Security-Policy")?.contains("form-action 'self' https://pay.example:8443") == true)

            #expect(try await browser.post("/account/buy/\(Self.epub)", ["csrf": "forged"]).status == 403)
            #expect(try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf], origin: "https://evil.example").status == 403)
            let paying = try await browser.post("/account/buy/\(Self.epub)", ["csrf": browser.csrf])
            #expect(paying.status == 303)
            let location = try #require(paying.header("Location"))
            #expect(location.hasPrefix("https://pay.example:8443/checkout?intent=ci_") && location.hasSuffix("&product=\(Self.epub)"), "\(location)")

            let library = String(decoding: try await browser.get("/account/library").body, as: UTF8.self)
            #expect(library.contains("Waiting for the payment") && library.contains("Salt and Stars"), "\(library)")
            // Nothing was granted by coming back: only the payment's signed event grants it.
            #expect(!library.contains("/account/library/\(Self.epub)/file"))
        }
    }
}

/// A browser's session on the store's pages: its cookie and the CSRF token of its forms.
struct WebSession {
    let http: StoreHTTP
    let cookie: String
    let csrf: String
    /// Where the sign-in sent the browser.
    let landed: String

    /// An account with a sign-in, made through the API.
    static func account(_ http: StoreHTTP, _ email: String) async throws -> AccountCreated {
        let reply = try await http.send("POST", "/v1/accounts", json: SignInTests.json(["email": email, "password": SignInTests.password, "deviceName": "laptop"]))
        return try reply.decode(AccountCreated.self)
    }

    /// Signs in through `/account`'s form as a browser does: the form's cookie and token, then the post.
    static func signIn(_ http: StoreHTTP, _ email: String, next: String) async throws -> WebSession {
        let form = try await http.send("GET", next)
        let formCookie = try #require(cookies(form)["kiosk_account_csrf"])
        let page = String(decoding: form.body, as: UTF8.self)
        let token = try #require(page.firstMatch(of: /name="csrf" value="([0-9a-f]+)"/)?.1)
        let reply = try await post(http, "/account/sign-in", ["csrf": String(token), "next": next, "email": email, "password": SignInTests.password],
                                   cookie: "kiosk_account_csrf=\(formCookie)")
        #expect(reply.status == 303, "\(String(decoding: reply.body, as: UTF8.self))")
        let session = try #require(cookies(reply)["kiosk_account"])
        return WebSession(http: http, cookie: "kiosk_account=\(session)", csrf: AccountPage.csrf(for: session), landed: reply.header("Location") ?? "")
    }

    func get(_ path: String, headers: [(name: String, value: String)] = []) async throws -> StoreHTTP.Reply {
        try await http.send("GET", path, headers: headers + [("Cookie", cookie)])
    }

    func post(_ path: String, _ fields: [String: String], origin: String? = nil, headers: [(name: String, value: String)] = []) async throws -> StoreHTTP.Reply {
        try await Self.post(http, path, fields, cookie: cookie, origin: origin, headers: headers)
    }

    static func post(_ http: StoreHTTP, _ path: String, _ fields: [String: String], cookie: String, origin: String? = nil,
                     headers extra: [(name: String, value: String)] = []) async throws -> StoreHTTP.Reply {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let body = fields.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        var headers = [(name: "Content-Type", value: "application/x-www-form-urlencoded"), (name: "Cookie", value: cookie)]
        if let origin { headers.append((name: "Origin", value: origin)) }
        headers += extra
        let response = try await HTTPClient().send(HTTPRequest(method: "POST", url: http.baseURL + path, headers: headers, body: Data(body.utf8)))
        return StoreHTTP.Reply(status: response.status, body: response.body, headers: response.headers)
    }

    /// The cookies a reply sets (several Set-Cookie fields arrive joined by commas).
    static func cookies(_ reply: StoreHTTP.Reply) -> [String: String] {
        var found: [String: String] = [:]
        for item in (reply.header("Set-Cookie") ?? "").components(separatedBy: ", ") {
            let pair = item.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let value = String(pair[pair.index(after: equals)...])
            if !value.isEmpty { found[String(pair[..<equals])] = value }
        }
        return found
    }
}
