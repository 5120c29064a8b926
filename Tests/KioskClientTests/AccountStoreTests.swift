import Foundation
import Hummingbird
import KioskClient
import KioskCore
import KioskServer
import KioskTestSupport
import Synchronization
import Testing

/// A home's account token (for an account without a sign-in, its only credential) goes to the
/// store that issued it, and to no other address a command is given.
@Suite("An account's token goes to its own store only")
struct AccountStoreTests {
    /// Another server: it records every Authorization header it is sent and answers 404.
    final class Capture: Sendable {
        let authorizations = Mutex<[String]>([])

        var router: Router<BasicRequestContext> {
            let router = Router()
            let answer: @Sendable (Request, BasicRequestContext) async throws -> Response = { [self] request, _ in
                if let value = request.headers[.authorization] { authorizations.withLock { $0.append(value) } }
                return Response(status: .notFound, headers: [.contentType: "application/json"],
                                 body: .init(byteBuffer: ByteBuffer(string: #"{"error":"not_found","message":"nothing here"}"#)))
            }
            router.get("**", use: answer)
            router.post("**", use: answer)
            return router
        }
    }

    @Test("a home with an account at one store is refused at another address, naming both stores, and that address is sent no token; the account's own store still takes it")
    func tokenStaysWithItsStore() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { _, url in
            let home = KioskHome(root: directory.path("home"))
            _ = try await KioskClient(home: home, server: url).buy("com.kiosk.credits.pack-5")
            let capture = Capture()
            try await LoopbackServer.run(capture.router, label: "capture") { port in
                let elsewhere = try KioskClient(home: home, server: "http://127.0.0.1:\(port)")
                let refused = await #expect(throws: ClientError.self) { _ = try await elsewhere.buy("com.kiosk.credits.pack-5") }
                #expect(refused.map { "\($0)" }?.contains("belongs to the store at \(url)") == true, "\(String(describing: refused))")
                #expect(capture.authorizations.withLock { $0 }.isEmpty, "the other address was sent \(capture.authorizations.withLock { $0 })")
            }
            let back = try KioskClient(home: home, server: url)
            #expect(try await back.buy("com.kiosk.credits.pack-10").outcome == .complete)
        }
    }
}
