import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The store's catalog as OPDS 1.2 (Atom) beside 2.0, from the same model (issue 64), judged by
/// `jing` against the OPDS 1.2 RELAX NG schema and by `feedparser` (`scripts/opds12_check.py`).
@Suite("OPDS 1.2 beside 2.0")
struct OPDS12Tests {
    static let navigation = "application/atom+xml;profile=opds-catalog;kind=navigation"

    @Test("every 1.2 feed, entry and the OpenSearch description pass jing and feedparser; /opds answers the format Accept asks for and each root links the other; an app with only Basic is challenged, then reaches the shelf and downloads an owned EPUB")
    func atomBesideJSON() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/jing"), "no /usr/bin/jing: run make test-tools (it installs Debian's jing)")
        try #require(FileManager.default.isExecutableFile(atPath: OPDSTests.python.path), "no \(OPDSTests.python.path): run make test-tools (it installs feedparser)")
        let directory = try TemporaryDirectory()
        let store = try PublicationTests.store(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let check = SampleStore.repository.appendingPathComponent("scripts/opds12_check.py").path
        let paths = ["/opds/v1.2", "/opds/v1.2/publications", "/opds/v1.2/new", "/opds/v1.2/series/com.kiosk.magazines.coastal-charts",
                     "/opds/v1.2/search?query=coastal", "/opds/v1.2/subjects/Fiction", "/opds/v1.2/publications/\(PublicationTests.epubBook)",
                     "/opds/v1.2/publications/\(PublicationTests.pdfIssue)", "/opds/v1.2/opensearch.xml",
                     // What XML cannot hold, asked for: left out, the feed still well-formed.
                     "/opds/v1.2/search?query=a%01b%EF%BF%BF%0B", "/opds/v1.2/subjects/%01x%1F"]
        let judged = try await KioskCommand.run([check] + paths.map { server.url + $0 }, program: OPDSTests.python)
        #expect(judged.status == 0, "\(judged.stdout)\(judged.stderr)")

        // A search as apps fill OpenSearch's template: `+` is a space, `%2B` a plus.
        let plus = String(decoding: try await http.send("GET", "/opds/v1.2/search?query=salt+and+stars").body, as: UTF8.self)
        #expect(plus.contains("<title>Salt and Stars</title>"), "\(plus)")
        let literal = String(decoding: try await http.send("GET", "/opds/search?query=salt%2Band%2Bstars").body, as: UTF8.self)
        #expect(!literal.contains("Salt and Stars") && literal.contains("Search: salt+and+stars"), "\(literal)")

        // Facets by subject and series on the catalog's lists, the one shown marked, in both formats.
        let fiction = String(decoding: try await http.send("GET", "/opds/v1.2/subjects/Fiction").body, as: UTF8.self)
        #expect(fiction.contains(#"href="\#(server.url)/opds/v1.2/subjects/Fiction" type="application/atom+xml;profile=opds-catalog;kind=acquisition" title="Fiction" opds:facetGroup="Subject" opds:activeFacet="true"/>"#), "\(fiction)")
        #expect(fiction.contains(#"opds:facetGroup="Series""#))
        let facets = (try JSONSerialization.jsonObject(with: try await http.send("GET", "/opds/subjects/Fiction").body) as? [String: Any])?["facets"] as? [[String: Any]]
        let active = facets?.flatMap { ($0["links"] as? [[String: Any]]) ?? [] }.filter { $0["rel"] as? String == "self" }.compactMap { $0["title"] as? String }
        #expect(active == ["Fiction"], "\(String(describing: facets))")

        // One address for every app: the format its Accept asks for.
        let atom = try await http.send("GET", "/opds", headers: [("Accept", "application/atom+xml;q=0.9, */*;q=0.1")])
        #expect(atom.status == 200 && atom.header("Content-Type") == Self.navigation && atom.header("Vary") == "Accept")
        let json = try await http.send("GET", "/opds", headers: [("Accept", "application/opds+json, application/atom+xml;q=0.5")])
        #expect(json.header("Content-Type") == "application/opds+json")
        // As real apps ask (their Accept, read in their sources): KOReader since July 2026 prefers 2.0;
        // KOReader before it and Librera send none and read only Atom; a browser names neither.
        let asked = [("application/opds+json, application/atom+xml;profile=opds-catalog, */*", "application/opds+json"),
                     (nil, Self.navigation), ("*/*", Self.navigation),
                     ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", Self.navigation),
                     ("application/atom+xml, application/opds+json;q=0", Self.navigation), ("application/json;q=0.4, application/atom+xml;q=0.3", "application/opds+json")]
        for (accept, type) in asked {
            let answer = try await http.send("GET", "/opds", headers: accept.map { [("Accept", $0)] } ?? [])
            #expect(answer.header("Content-Type") == type, "Accept: \(accept ?? "none")")
        }
        // Each format's root at its own address whatever Accept says; each feed's start is it.
        #expect(try await http.send("GET", "/opds/v2", headers: [("Accept", "application/atom+xml")]).header("Content-Type") == "application/opds+json")
        #expect(String(decoding: json.body, as: UTF8.self).contains(#""href":"\#(server.url)/opds/v2","rel":"start""#))
        let atomRoot = String(decoding: atom.body, as: UTF8.self)
        #expect(atomRoot.contains(#"rel="alternate" href="\#(server.url)/opds/v2" type="application/opds+json""#), "\(atomRoot)")
        #expect(String(decoding: json.body, as: UTF8.self).contains(#""href":"\#(server.url)/opds/v1.2""#))
        let etag = try #require(atom.header("ETag"))
        #expect(try await http.send("GET", "/opds/v1.2", headers: [("If-None-Match", etag)]).status == 304, "the same root at its own address")

        // A 1.x app that sends credentials only when challenged (KyBook): 401 with Basic, then the shelf.
        let refused = try await http.send("GET", "/opds/v1.2/shelf")
        #expect(refused.status == 401 && refused.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
        // The authentication document names the shelf and where to create an account.
        let document = try JSONSerialization.jsonObject(with: refused.body) as? [String: Any]
        let rels = Set(((document?["links"] as? [[String: Any]]) ?? []).compactMap { $0["rel"] as? String })
        #expect(rels.isSuperset(of: ["http://opds-spec.org/shelf", "register", "help"]), "\(rels)")
        let reader = try await http.send("POST", "/v1/accounts", json: #"{"email": "reader@example.com", "password": "correct horse battery"}"#)
            .decode(AccountCreated.self)
        #expect(try await http.pay(PublicationTests.epubBook, token: reader.token).status == 200)
        let basic = "Basic " + Data("reader@example.com:correct horse battery".utf8).base64EncodedString()
        let shelfJudged = try await KioskCommand.run([check, "--authorization", basic, server.url + "/opds/v1.2/shelf"], program: OPDSTests.python)
        #expect(shelfJudged.status == 0, "\(shelfJudged.stdout)\(shelfJudged.stderr)")
        let shelf = String(decoding: try await http.send("GET", "/opds/v1.2/shelf", authorization: basic).body, as: UTF8.self)
        let content = "\(server.url)/opds/content/\(PublicationTests.epubBook)"
        #expect(shelf.contains(#"href="\#(content)" type="application/epub+zip""#), "\(shelf)")
        #expect(!shelf.contains(PublicationTests.pdfIssue), "only what the account owns")
        let downloaded = try await http.send("GET", "/opds/content/\(PublicationTests.epubBook)", authorization: basic)
        let publisher = try Data(contentsOf: store.content.appendingPathComponent("publications/Harbor Tales.epub"))
        #expect(downloaded.status == 200 && downloaded.body == publisher)
        _ = await server.stop()
    }

    @Test("buying from inside an app: the buy link leads to the shop's page (text/html) with the price and what it leads to, in both formats; once paid, the shelf links the file itself; a free book stays open access")
    func entryFromTheSameModel() async throws {
        let directory = try TemporaryDirectory()
        let store = try PublicationTests.store(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let page = "\(server.url)/products/\(PublicationTests.epubBook)"
        let entry = String(decoding: try await http.send("GET", "/opds/v1.2/publications/\(PublicationTests.epubBook)").body, as: UTF8.self)
        #expect(entry.contains(#"<link rel="http://opds-spec.org/acquisition/buy" href="\#(page)" type="text/html"><opds:price currencycode="USD">"#), "\(entry)")
        #expect(entry.contains(#"<opds:indirectAcquisition type="application/epub+zip"/>"#), "\(entry)")
        let publication = try JSONSerialization.jsonObject(with: try await http.send("GET", "/opds/publications/\(PublicationTests.epubBook)").body) as? [String: Any]
        let buy = (publication?["links"] as? [[String: Any]])?.first { $0["rel"] as? String == "http://opds-spec.org/acquisition/buy" }
        #expect(buy?["href"] as? String == page && buy?["type"] as? String == "text/html", "\(String(describing: buy))")
        #expect(((buy?["properties"] as? [String: Any])?["indirectAcquisition"] as? [[String: Any]])?.first?["type"] as? String == "application/epub+zip")
        // The link leads somewhere an app can hand to a browser: the shop's page, with its Buy.
        let shopPage = try await http.send("GET", "/products/\(PublicationTests.epubBook)")
        #expect(shopPage.status == 200 && String(decoding: shopPage.body, as: UTF8.self).contains("/account/buy/\(PublicationTests.epubBook)"))
        // Paid: the shelf links the file itself, in both formats.
        let reader = try await http.createAccount()
        #expect(try await http.pay(PublicationTests.epubBook, token: reader.token).status == 200)
        let shelf = String(decoding: try await http.send("GET", "/opds/v1.2/shelf", token: reader.token).body, as: UTF8.self)
        #expect(shelf.contains(#"<link rel="http://opds-spec.org/acquisition" href="\#(server.url)/opds/content/\#(PublicationTests.epubBook)" type="application/epub+zip"/>"#), "\(shelf)")
        let shelf2 = String(decoding: try await http.send("GET", "/opds/shelf", token: reader.token).body, as: UTF8.self)
        #expect(shelf2.contains(#""href":"\#(server.url)/opds/content/\#(PublicationTests.epubBook)","rel":"http://opds-spec.org/acquisition""#), "\(shelf2)")
        #expect(try await http.send("GET", "/opds/content/\(PublicationTests.epubBook)", token: reader.token).status == 200)
        let free = String(decoding: try await http.send("GET", "/opds/v1.2/publications/com.kiosk.books.tidewater-stories").body, as: UTF8.self)
        #expect(free.contains(#"<link rel="http://opds-spec.org/acquisition/open-access" href="\#(server.url)/opds/content/com.kiosk.books.tidewater-stories" type="application/epub+zip"/>"#), "\(free)")
        #expect(entry.contains(#"rel="http://opds-spec.org/image/thumbnail""#) && entry.contains(#"href="\#(server.url)/products/\#(PublicationTests.epubBook)" type="text/html""#))
        // A magazine of HTML pages packed as tar.gz is the Kiosk client's: left out of the apps' feeds,
        // its plan too (nothing in it would open); the PDF magazine is there.
        #expect(try await http.send("GET", "/opds/v1.2/series/com.kiosk.magazines.harbor-monthly").status == 404)
        #expect(try await http.send("GET", "/opds/publications/com.kiosk.magazines.harbor-monthly.issue-01").status == 404)
        let everything = String(decoding: try await http.send("GET", "/opds/v1.2/publications").body, as: UTF8.self)
        #expect(!everything.contains("harbor-monthly") && !everything.contains("application/gzip") && !everything.contains("application/zip"), "\(everything)")
        #expect(everything.contains("com.kiosk.magazines.coastal-charts.winter-2026") && everything.contains(PublicationTests.comic))
        #expect(try await http.send("GET", "/products/com.kiosk.magazines.harbor-monthly.issue-01").status == 200, "still sold in the shop")
        _ = await server.stop()
    }

    @Test("OPDS Progression: the shelf links each owned publication's progression; a document round-trips and passes the draft's schema; an older write is a 409 with the newer; others are refused")
    func progression() async throws {
        let directory = try TemporaryDirectory()
        let store = try PublicationTests.store(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let http = StoreHTTP(baseURL: server.url)
        let reader = try await http.send("POST", "/v1/accounts", json: #"{"email": "reader@example.com", "password": "correct horse battery"}"#)
            .decode(AccountCreated.self)
        #expect(try await http.pay(PublicationTests.epubBook, token: reader.token).status == 200)
        let basic = "Basic " + Data("reader@example.com:correct horse battery".utf8).base64EncodedString()
        let path = "/opds/progression/\(PublicationTests.epubBook)"
        let shelf = String(decoding: try await http.send("GET", "/opds/shelf", authorization: basic).body, as: UTF8.self)
        #expect(shelf.contains(#""href":"\#(server.url)\#(path)","rel":"http://opds-spec.org/progression","type":"application/opds-progression+json""#), "\(shelf)")
        let nothing = try await http.send("GET", path, authorization: basic)
        #expect(nothing.status == 200 && nothing.body.isEmpty, "nothing said yet: the draft's empty payload")

        func put(_ json: String) async throws -> StoreHTTP.Reply {
            try await http.send("PUT", path, authorization: basic, json: json, headers: [("Content-Type", "application/opds-progression+json")])
        }
        let sent = ##"{"title": "Chapter 1", "modified": "2026-01-27T11:00:00Z", "device": {"id": "urn:uuid:019c0047-cc8d-7ec4-a3c3-938ccadc020a", "name": "Ebook Reader (Pixel 10 Pro)"}, "progression": 0.25, "references": ["#t=40.274", "chapter1.xhtml#par36", "https://example.com/chapter1"]}"##
        let stored = try await put(sent)
        #expect(stored.status == 200 && stored.header("Content-Type") == "application/opds-progression+json")
        let read = try await http.send("GET", path, authorization: basic)
        let document = try JSONSerialization.jsonObject(with: read.body) as? [String: Any]
        #expect(document?["modified"] as? String == "2026-01-27T11:00:00Z" && document?["progression"] as? Double == 0.25)
        #expect((document?["device"] as? [String: Any])?["name"] as? String == "Ebook Reader (Pixel 10 Pro)")
        #expect(document?["references"] as? [String] == ["#t=40.274", "chapter1.xhtml#par36", "https://example.com/chapter1"], "every reference, as sent")
        #expect(document?["title"] as? String == "Chapter 1")
        // The draft's schema, judged by jsonschema.
        let saved = directory.path("progression.json")
        try read.body.write(to: saved)
        let judged = try await KioskCommand.run([SampleStore.repository.appendingPathComponent("scripts/progression_check.py").path, saved.path], program: OPDSTests.python)
        #expect(judged.status == 0, "\(judged.stdout)\(judged.stderr)")

        // An older write loses: 409 with the newer one.
        let stale = try await put(#"{"modified": "2026-01-20T09:00:00Z", "device": {"id": "urn:uuid:old", "name": "Old phone"}, "progression": 0.1}"#)
        #expect(stale.status == 409)
        #expect((try JSONSerialization.jsonObject(with: stale.body) as? [String: Any])?["progression"] as? Double == 0.25)
        // A bad document is a 400 naming the field; nothing changes.
        #expect(try await put(#"{"modified": "yesterday", "device": {"id": "urn:x", "name": "x"}, "progression": 0.9}"#).status == 400)
        for id in ["phone", ":x", "urn:", "9p:x", "urn:a b", "ü:x"] {
            let refused = try await put(#"{"modified": "2026-01-28T11:00:00Z", "device": {"id": "\#(id)", "name": "x"}, "progression": 0.9}"#)
            #expect(refused.status == 400 && String(decoding: refused.body, as: UTF8.self).contains("device.id"), "\(id) is no URI")
        }

        // Without credentials, the challenge; another account's is refused.
        let anonymous = try await http.send("GET", path)
        #expect(anonymous.status == 401 && anonymous.header("WWW-Authenticate")?.hasPrefix("Basic") == true)
        let other = try await http.createAccount()
        #expect(try await http.send("GET", path, token: other.token).status == 403)
        _ = await server.stop()
    }

    @Test("kiosk progress: a device sets its place and reads it back; no place yet is said as such; careless percentages are refused")
    func progressCommand() async throws {
        let directory = try TemporaryDirectory()
        let store = try PublicationTests.store(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        #expect(try await KioskCommand.run(["buy", PublicationTests.epubBook, "--no-download"], environment: home).status == 0)
        let none = try await KioskCommand.run(["progress", PublicationTests.epubBook], environment: home)
        #expect(none.status == 0 && none.stdout.contains("no device has said where you are yet"), "\(none)")
        let set = try await KioskCommand.run(["progress", PublicationTests.epubBook, "--set", "42%"], environment: home)
        #expect(set.status == 0 && set.stdout.contains("at 42 %"), "\(set)")
        let read = try await KioskCommand.run(["progress", PublicationTests.epubBook], environment: home)
        #expect(read.stdout.contains("42 %"), "\(read)")
        #expect(try await KioskCommand.run(["progress", PublicationTests.epubBook, "--set", "142%"], environment: home).status == 2)
        for careless in ["0.42", "0x10%", "1e2%", "-5%", "42%%"] {
            #expect(try await KioskCommand.run(["progress", PublicationTests.epubBook, "--set=\(careless)"], environment: home).status == 2, "\(careless)")
        }
        _ = await server.stop()
    }
}
