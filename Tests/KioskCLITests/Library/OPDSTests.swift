import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The store's catalog as OPDS 2.0 (issue 47), judged by palace-webpub-manifest-parser (PyPI,
/// `scripts/opds_check.py`), and publication metadata from the catalog and an EPUB's own.
@Suite("OPDS 2.0 and publication metadata")
struct OPDSTests {
    static let python = SampleStore.repository.appendingPathComponent(".build/venv/bin/python")
    static let chartsPlan = "com.kiosk.magazines.coastal-charts.yearly"

    @Test("every feed parses with palace-webpub-manifest-parser; a feed answers 304 to its ETag; the shelf asks for credentials, then lists what the account owns; an EPUB's author comes from its package document")
    func feeds() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.python.path), "no \(Self.python.path): run make test-tools (it installs palace-webpub-manifest-parser)")
        let directory = try TemporaryDirectory()
        let store = try PublicationTests.store(in: directory)
        try store.editCatalog("books.json") { products in
            for index in products.indices where products[index]["id"] as? String == PublicationTests.pdfIssue {
                products[index]["contributors"] = [["name": "Ada Brooks", "role": "author"], ["name": "Ivo Lind", "role": "illustrator"]]
                products[index]["isbn"] = "978-0-306-40615-7"
                products[index]["language"] = "en-GB"
                products[index]["subjects"] = ["Engineering", "Boats"]
                products[index]["pageCount"] = 212
            }
        }
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let paths = ["/opds", "/opds/v2", "/opds/publications", "/opds/new", "/opds/series/com.kiosk.magazines.coastal-charts", "/opds/search?query=coastal",
                     "/opds/subjects/Boats", "/opds/publications/\(PublicationTests.pdfIssue)", "/opds/publications/\(PublicationTests.epubBook)"]
        let judged = try await KioskCommand.run([SampleStore.repository.appendingPathComponent("scripts/opds_check.py").path] + paths.map { server.url + $0 },
                                                program: Self.python)
        #expect(judged.status == 0, "\(judged.stdout)\(judged.stderr)")

        let root = try await http.send("GET", "/opds/v2")
        #expect(root.status == 200 && root.header("Content-Type") == "application/opds+json")
        let etag = try #require(root.header("ETag"))
        #expect(try await http.send("GET", "/opds/v2", headers: [("If-None-Match", etag)]).status == 304)

        // The catalog's metadata, and the EPUB's own where the catalog says nothing.
        let book = try JSONSerialization.jsonObject(with: try await http.send("GET", "/opds/publications/\(PublicationTests.pdfIssue)").body) as? [String: Any]
        let metadata = book?["metadata"] as? [String: Any]
        #expect(metadata?["identifier"] as? String == "urn:isbn:9780306406157")
        #expect((metadata?["author"] as? [[String: Any]])?.first?["name"] as? String == "Ada Brooks")
        #expect((metadata?["illustrator"] as? [[String: Any]])?.first?["name"] as? String == "Ivo Lind")
        #expect(metadata?["numberOfPages"] as? Int == 212)
        let links = book?["links"] as? [[String: Any]] ?? []
        let buy = links.first { $0["rel"] as? String == "http://opds-spec.org/acquisition/buy" }
        #expect(((buy?["properties"] as? [String: Any])?["price"] as? [String: Any])?["currency"] as? String == "USD", "\(links)")
        let epub = try JSONSerialization.jsonObject(with: try await http.send("GET", "/opds/publications/\(PublicationTests.epubBook)").body) as? [String: Any]
        let epubMetadata = epub?["metadata"] as? [String: Any]
        #expect((epubMetadata?["author"] as? [[String: Any]])?.first?["name"] as? String == "M. Ferris", "\(String(describing: epubMetadata))")
        #expect(epubMetadata?["language"] as? String == "en")

        // The shelf: a 401 with the authentication document, then the account's own.
        let refused = try await http.send("GET", "/opds/shelf")
        #expect(refused.status == 401 && refused.header("Content-Type") == "application/opds-authentication+json")
        #expect(refused.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
        let document = try JSONSerialization.jsonObject(with: refused.body) as? [String: Any]
        #expect(((document?["authentication"] as? [[String: Any]])?.first?["type"] as? String) == "http://opds-spec.org/auth/basic")
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        #expect(try await KioskCommand.run(["buy", PublicationTests.epubBook, "--no-download"], environment: home).status == 0)
        let token = try #require(try await KioskCommand.run(["account", "--show-token"], environment: home).stdout
            .split(separator: "\n").first { $0.hasPrefix("token: ") }.flatMap { $0.dropFirst("token: ".count).split(separator: " ").first.map(String.init) })
        let shelf = try await http.send("GET", "/opds/shelf", token: token)
        #expect(shelf.status == 200)
        let owned = (try JSONSerialization.jsonObject(with: shelf.body) as? [String: Any])?["publications"] as? [[String: Any]] ?? []
        #expect(owned.compactMap { ($0["metadata"] as? [String: Any])?["title"] as? String } == [PublicationTests.epubBook])
        let other = try await http.createAccount()
        let empty = try await http.send("GET", "/opds/shelf", token: other.token)
        #expect(((try JSONSerialization.jsonObject(with: empty.body) as? [String: Any])?["publications"] as? [Any])?.isEmpty == true, "another account's shelf is its own")

        // The acquisition link: the owner's file, with ranges; nobody else's.
        let path = "/opds/content/\(PublicationTests.epubBook)"
        let publisher = try Data(contentsOf: store.content.appendingPathComponent("publications/Harbor Tales.epub"))
        let anonymous = try await http.send("GET", path)
        #expect(anonymous.status == 401 && anonymous.header("Content-Type") == "application/opds-authentication+json")
        let fetched = try await http.send("GET", path, token: token)
        #expect(fetched.status == 200 && fetched.body == publisher && fetched.header("Content-Type") == "application/epub+zip")
        let part = try await http.send("GET", path, token: token, headers: [("Range", "bytes=10-")])
        #expect(part.status == 206 && part.body == publisher.dropFirst(10))
        #expect(try await http.send("GET", path, token: other.token).status == 403)

        // A reading app's Basic credentials: the account's email and password.
        let reader = try await http.send("POST", "/v1/accounts", json: #"{"email": "reader@example.com", "password": "correct horse battery"}"#)
            .decode(AccountCreated.self)
        #expect(try await http.pay(PublicationTests.pdfIssue, token: reader.token).status == 200)
        let basic = "Basic " + Data("reader@example.com:correct horse battery".utf8).base64EncodedString()
        let basicShelf = try await http.send("GET", "/opds/shelf", authorization: basic)
        let basicOwned = (try JSONSerialization.jsonObject(with: basicShelf.body) as? [String: Any])?["publications"] as? [[String: Any]] ?? []
        #expect(basicShelf.status == 200 && basicOwned.count == 1, "\(basicShelf.status)")
        let pdfPath = "/opds/content/\(PublicationTests.pdfIssue)"
        #expect(try await http.send("GET", pdfPath, authorization: basic).body == PublicationTests.pdf())
        let wrong = "Basic " + Data("reader@example.com:wrong password!".utf8).base64EncodedString()
        let refusedBasic = try await http.send("GET", pdfPath, authorization: wrong)
        #expect(refusedBasic.status == 401 && refusedBasic.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
        #expect(try await http.send("GET", "/opds/shelf", authorization: wrong).status == 401)

        // kiosk products shows the author; --long everything.
        #expect(try await KioskCommand.run(["sync"], environment: home).status == 0)
        let listed = try await KioskCommand.run(["products"], environment: home)
        #expect(listed.stdout.contains("by Ada Brooks"), "\(listed.stdout)")
        let long = try await KioskCommand.run(["products", "--long", PublicationTests.pdfIssue], environment: home)
        #expect(long.stdout.contains("illustrator: Ivo Lind") && long.stdout.contains("identifiers: urn:isbn:9780306406157"), "\(long.stdout)")
        _ = await server.stop()
    }

    @Test("Basic credentials are checked once and remembered: twenty requests pass a limit of five sign-ins per email; an old password sent again and again locks nobody out; the shelf lists the issues a subscription covers and serves them; a deleted account is refused at once")
    func basicRemembered() async throws {
        let directory = try TemporaryDirectory()
        let store = try PublicationTests.store(in: directory)
        // A plan of the PDF magazine: its issues open in any app (the HTML magazine's are the Kiosk client's).
        try store.editCatalog("publications.json") { products in
            products.append(["id": Self.chartsPlan, "kind": "subscription", "title": "Coastal Charts, yearly", "summary": "Every issue for a year.",
                             "price": "9.99", "currency": "USD", "series": "com.kiosk.magazines.coastal-charts", "periodMonths": 12])
        }
        let server = try await ServerProcess.start(store, extraArguments: ["--rate-limit-sign-ins-per-email", "5/hour"], log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let reader = try await http.send("POST", "/v1/accounts", json: #"{"email": "reader@example.com", "password": "correct horse battery"}"#)
            .decode(AccountCreated.self)
        #expect(try await http.pay(Self.chartsPlan, token: reader.token).status == 200)
        let basic = "Basic " + Data("reader@example.com:correct horse battery".utf8).base64EncodedString()
        var statuses: [Int] = []
        var shelf: [[String: Any]] = []
        for _ in 0..<20 {
            let answer = try await http.send("GET", "/opds/shelf", authorization: basic)
            statuses.append(answer.status)
            shelf = (try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["publications"] as? [[String: Any]] ?? []
        }
        #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
        // The shelf is an OPDS 2.0 feed too, judged with the reader's credentials.
        let judged = try await KioskCommand.run([SampleStore.repository.appendingPathComponent("scripts/opds_check.py").path, "--authorization", basic,
                                                 server.url + "/opds/shelf"], program: Self.python)
        #expect(judged.status == 0, "\(judged.stdout)\(judged.stderr)")
        // The subscription's issues are the account's, as a receipt's entitlement judges them.
        let issues = shelf.compactMap { publication in
            ((publication["links"] as? [[String: Any]]) ?? []).compactMap { $0["href"] as? String }.first { $0.contains("/opds/publications/") }
        }.map { String($0.split(separator: "/").last ?? "") }
        #expect(!issues.isEmpty && issues.allSatisfy { $0.hasPrefix("com.kiosk.magazines.coastal-charts.") }, "\(issues)")
        for issue in issues {
            #expect(try await http.send("GET", "/opds/content/\(issue)", authorization: basic).status == 200, "\(issue)")
        }
        #expect(try await http.send("GET", "/opds/content/com.kiosk.books.river-of-maps", authorization: basic).status == 403)
        // A wrong password is still checked as a sign-in: refused, and counted.
        let wrong = "Basic " + Data("reader@example.com:wrong password!".utf8).base64EncodedString()
        #expect(try await http.send("GET", "/opds/shelf", authorization: wrong).status == 401)
        // An app still sending an old password: the same refused pair counts once, so its owner is
        // not locked out of signing in anywhere (a limit of five an hour, ten tries).
        for _ in 0..<10 { #expect(try await http.send("GET", "/opds/shelf", authorization: wrong).status == 401) }
        let signIn = try await http.send("POST", "/v1/sessions", json: #"{"email": "reader@example.com", "password": "correct horse battery", "deviceName": "tablet"}"#)
        #expect(signIn.status == 201, "\(signIn.status): \(String(decoding: signIn.body, as: UTF8.self))")
        // Each other password tried still counts: guessing is limited.
        var guessed: [Int] = []
        for guess in 0..<6 {
            guessed.append(try await http.send("GET", "/opds/shelf", authorization: "Basic " + Data("reader@example.com:guess \(guess) xxxx".utf8).base64EncodedString()).status)
        }
        #expect(guessed.last == 429, "\(guessed)")
        // The account erased: the remembered pair no longer opens anything.
        #expect(try await http.send("DELETE", "/v1/account", token: reader.token, json: #"{"password": "correct horse battery"}"#).status == 200)
        #expect(try await http.send("GET", "/opds/shelf", authorization: basic).status != 200)
        _ = await server.stop()
    }

    @Test("the shelf lists exactly what the account owns after three purchases, a refund and a revocation; the refunded and revoked files are refused")
    func shelfAfterRefundAndRevoke() async throws {
        let directory = try TemporaryDirectory()
        let store = try PublicationTests.store(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let adminToken = try String(contentsOf: store.data.appendingPathComponent("admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let account = try await http.createAccount()
        var transactions: [String: String] = [:]
        for id in [PublicationTests.epubBook, PublicationTests.pdfIssue, PublicationTests.comic] {
            let paid = try await http.pay(id, token: account.token)
            let object = try JSONSerialization.jsonObject(with: paid.body) as? [String: Any]
            transactions[id] = try #require((object?["transaction"] as? [String: Any])?["transactionId"] as? String, "\(paid.status)")
        }
        func shelf() async throws -> Set<String> {
            let answer = try await http.send("GET", "/opds/shelf", token: account.token)
            let publications = (try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])?["publications"] as? [[String: Any]] ?? []
            return Set(publications.compactMap { ($0["metadata"] as? [String: Any])?["title"] as? String })
        }
        #expect(try await shelf() == [PublicationTests.epubBook, PublicationTests.pdfIssue, PublicationTests.comic])
        #expect(try await http.send("POST", "/v1/admin/transactions/\(try #require(transactions[PublicationTests.pdfIssue]))/refund", token: adminToken).status == 200)
        #expect(try await http.send("POST", "/v1/admin/transactions/\(try #require(transactions[PublicationTests.comic]))/revoke", token: adminToken).status == 200)
        #expect(try await shelf() == [PublicationTests.epubBook])
        #expect(try await http.send("GET", "/opds/content/\(PublicationTests.pdfIssue)", token: account.token).status == 403)
        #expect(try await http.send("GET", "/opds/content/\(PublicationTests.comic)", token: account.token).status == 403)
        #expect(try await http.send("GET", "/opds/content/\(PublicationTests.epubBook)", token: account.token).status == 200)
        _ = await server.stop()
    }

    @Test("a wrong ISBN check digit, an ISSN, a language tag or a role is refused at start, naming the product and the field")
    func badMetadataRefused() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let cases: [(field: String, value: Any, says: String)] = [
            ("isbn", "978-0-306-40615-8", "check digit"), ("issn", "0317-8472", "check character"), ("language", "english!", "BCP 47"),
            ("contributors", [["name": "X", "role": "ghost"]], "is not a role"), ("author", [""], "non-empty"),
        ]
        for (index, (field, value, says)) in cases.enumerated() {
            try store.editCatalog("books.json") { products in
                for key in ["isbn", "issn", "language", "contributors", "author"] { products[0].removeValue(forKey: key) }
                products[0][field] = value
            }
            let started = try await KioskCommand.run(["serve", "--catalog", store.catalog.path, "--content", store.content.path,
                                                      "--data", directory.path("data-\(index)").path, "--port", "0"])
            #expect(started.status == 1 && started.stderr.contains("field \"\(field)\"") && started.stderr.contains(says), "\(field): \(started.stderr)")
        }
        // Valid ones check: ISBN-13 and ISSN with their check characters.
        #expect(PublicationMetadata.isbn("9780306406157") == "urn:isbn:9780306406157")
        #expect(PublicationMetadata.issn("0317-8471") == "urn:issn:0317-8471")
        #expect(PublicationMetadata.issn("2049-3630") == "urn:issn:2049-3630")
    }
}
