import Foundation
import KioskCore
@testable import KioskServer
import KioskTestSupport
import Testing

/// The shop's kept pages answered on the event loop (``ShopPageResponder``), seen from a raw
/// connection: the same answers as the router's, in order among pipelined requests.
@Suite("Shop pages on the event loop")
struct ShopPageResponderTests {
    @Test("a kept page is answered as the router answered it: the same status, fields and bytes, its HEAD and its 304, pipelined in order, counted as the route's")
    func sameAsTheRouter() async throws {
        try await CatalogNotModifiedTests.withServer { port, url in
            let path = "/products/com.kiosk.books.salt-and-stars"
            // The router makes the page (and keeps it); Connection: close keeps the answer its own.
            let routedClient = try SlowClient(port: port)
            routedClient.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            let routed = try #require(try await CatalogNotModifiedTests.answers(routedClient, count: 1).first)
            #expect(routed.status == 200)
            let etag = try #require(routed.headers["etag"])
            let client = try SlowClient(port: port)
            client.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                + "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \(etag)\r\n\r\n"
                + "GET /products/com.kiosk.nothing-of-the-kind HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                + "GET /books HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let answers = try await CatalogNotModifiedTests.answers(client, count: 4)
            #expect(answers.map(\.status) == [200, 304, 404, 200])
            #expect(answers[0].body == routed.body, "the kept page's bytes")
            var (kept, made) = (answers[0].headers, routed.headers)
            (kept["date"], made["date"], made["connection"]) = (nil, nil, nil)
            #expect(kept == made, "the router's fields:\n\(kept)\n\(made)")
            #expect(answers[1].headers["etag"] == etag && answers[1].body.isEmpty)
            // A HEAD: the fields, no body (the next answer's bytes follow at once).
            client.send("HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let head = try #require(try await CatalogNotModifiedTests.answers(client, count: 1, bodiless: true).first)
            #expect(head.status == 200 && head.headers["content-length"] == routed.headers["content-length"] && head.headers["etag"] == etag)
            client.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await CatalogNotModifiedTests.answers(client, count: 1).first?.body == Array("ok".utf8), "nothing after the HEAD's fields but the next answer")
            // Asked again, the 404 and /books are kept too: the same answers.
            client.send("GET /products/com.kiosk.nothing-of-the-kind HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /books HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let again = try await CatalogNotModifiedTests.answers(client, count: 2)
            #expect(again.map(\.status) == [404, 200] && again[0].body == answers[2].body && again[1].body == answers[3].body)
            let metrics = String(decoding: try await StoreHTTP(baseURL: url).send("GET", "/metrics").body, as: UTF8.self)
            #expect(metrics.contains(#"kiosk_http_requests_total{route="/products/{id}",method="GET",status="200"} 2"#), "\(metrics)")
            #expect(metrics.contains(#"kiosk_http_requests_total{route="/products/{id}",method="HEAD",status="200"} 1"#))
            #expect(metrics.contains(#"kiosk_http_requests_total{route="/products/{id}",method="GET",status="404"} 2"#))
            #expect(metrics.contains(#"kiosk_http_requests_total{route="/products/{id}",method="GET",status="304"} 1"#))
            #expect(metrics.contains(#"kiosk_http_requests_total{route="/books",method="GET",status="200"} 2"#))
        }
    }

    @Test("a kept page answered from a fresh connection's bytes (BytesResponder) is the same as the event loop's answer: its GET, HEAD and 304, with a query, in order")
    func sameFromBytes() async throws {
        try await CatalogNotModifiedTests.withServer { port, _ in
            let path = "/search?q=harbor"
            let maker = try SlowClient(port: port)
            maker.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            let etag = try #require(try await CatalogNotModifiedTests.answers(maker, count: 1).first?.headers["etag"])
            let asked = ["GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: reader\r\n\r\n",
                         "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: W/\"x\", \(etag)\r\n\r\n",
                         "HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"]
            // From bytes: a fresh connection whose every request is a kept page.
            let fresh = try SlowClient(port: port)
            var fromBytes: [CatalogNotModifiedTests.Answer] = []
            for (index, request) in asked.enumerated() {
                fresh.send(request)
                fromBytes += try await CatalogNotModifiedTests.answers(fresh, count: 1, bodiless: index == 2)
            }
            // On the event loop: a connection the HTTP stack reads (its first request is another).
            let stacked = try SlowClient(port: port)
            stacked.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            _ = try await CatalogNotModifiedTests.answers(stacked, count: 1)
            var onTheLoop: [CatalogNotModifiedTests.Answer] = []
            for (index, request) in asked.enumerated() {
                stacked.send(request)
                onTheLoop += try await CatalogNotModifiedTests.answers(stacked, count: 1, bodiless: index == 2)
            }
            #expect(fromBytes.map(\.status) == [200, 304, 200])
            for (bytes, loop) in zip(fromBytes, onTheLoop) {
                var (a, b) = (bytes.headers, loop.headers)
                (a["date"], b["date"]) = (nil, nil)
                #expect(bytes.status == loop.status && a == b && bytes.body == loop.body, "\(bytes.status): \(a) / \(b)")
            }
            // Still answering after the three: the connection is the stack's only once it asks another thing.
            fresh.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await CatalogNotModifiedTests.answers(fresh, count: 1).first?.body == Array("ok".utf8))
        }
    }

    @Test("pages are kept to a bound in bytes, a long made-up address is not kept, and a missing page's ETag never makes a 304")
    func bounds() async throws {
        let pages = RenderedPages()
        let long = "/books?" + String(repeating: "a", count: RenderedPages.longestAddress)
        _ = try pages.page(version: "v1", address: long) { RenderedPages.Page(status: .ok, html: "x") }
        #expect(pages.kept(version: "v1", address: long) == nil)
        let big = String(repeating: "b", count: RenderedPages.byteLimit / 3)
        for index in 0..<3 {
            _ = try pages.page(version: "v1", address: "/p\(index)") { RenderedPages.Page(status: .ok, html: big) }
        }
        #expect(pages.kept(version: "v1", address: "/p2") != nil && pages.kept(version: "v1", address: "/p0") == nil,
                "the third page's bytes passed the bound: the kept ones went")
        try await CatalogNotModifiedTests.withServer { port, _ in
            let client = try SlowClient(port: port)
            for _ in 0..<2 {
                client.send("GET /products/com.kiosk.nothing-at-all HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: *\r\n\r\n")
                #expect(try await CatalogNotModifiedTests.answers(client, count: 1).first?.status == 404)
            }
        }
    }

    @Test("the shop's route names, as the router's metrics give them, and none for another path")
    func routes() {
        #expect(ShopPageResponder.route(of: "/") == "/")
        #expect(ShopPageResponder.route(of: "/?x=1") == "/")
        #expect(ShopPageResponder.route(of: "/search?q=harbor") == "/search")
        #expect(ShopPageResponder.route(of: "/products/a.b") == "/products/{id}")
        #expect(ShopPageResponder.route(of: "/subjects/Sea") == "/subjects/{subject}")
        #expect(ShopPageResponder.route(of: "/series/x?next=/a/b") == "/series/{id}")
        #expect(ShopPageResponder.route(of: "/books?page=2") == "/books")
        for other in ["/products/", "/products/a/b", "/v1/catalog", "/account/library", "//", "/kiosk.css", "/booksx", "/books/",
                      "/products//", "products/a", "", "/search/x", "/productsx/a", "/séries/a"] {
            #expect(ShopPageResponder.route(of: other) == nil, "\(other)")
        }
    }
}
