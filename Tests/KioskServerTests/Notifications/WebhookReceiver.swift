import Foundation
import Hummingbird
import Logging
import Synchronization

/// A publisher's endpoint the test runs: records every POST, answers 500 while `failing`.
final class WebhookReceiver: Sendable {
    struct Arrival: Sendable {
        var body: Data
        var notificationUUID: String
        var type: String
        var accountId: String?
        var accepted: Bool
    }

    let failing = Atomic<Bool>(true)
    /// Bytes of body each answer carries (a backend may answer 200 with a page of its own).
    let answerBytes: Int

    init(answerBytes: Int = 0) {
        self.answerBytes = answerBytes
    }
    private let arrivals = Mutex<[Arrival]>([])

    var accepted: [Arrival] { arrivals.withLock { $0.filter(\.accepted) } }
    var attempts: Int { arrivals.withLock { $0.count } }

    func record(_ body: Data) -> Bool {
        let accepted = !failing.load(ordering: .relaxed)
        let payload = (try? JSONDecoder().decode([String: String].self, from: body))?["signedPayload"] ?? ""
        let decoded = (try? Self.payload(payload)) ?? [:]
        let data = decoded["data"] as? [String: Any]
        arrivals.withLock {
            $0.append(Arrival(body: body, notificationUUID: decoded["notificationUUID"] as? String ?? "", type: decoded["notificationType"] as? String ?? "",
                              accountId: data?["accountId"] as? String, accepted: accepted))
        }
        return accepted
    }

    /// A compact JWS's payload, unverified.
    static func payload(_ jws: String) throws -> [String: Any] {
        let parts = jws.split(separator: ".")
        guard parts.count == 3 else { return [:] }
        var text = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return try JSONSerialization.jsonObject(with: Data(base64Encoded: text) ?? Data()) as? [String: Any] ?? [:]
    }

    /// Runs the receiver on a free port of 127.0.0.1 for the length of `body`, which gets its URL.
    func run<T: Sendable>(_ body: @Sendable (String) async throws -> T) async throws -> T {
        let router = Router()
        router.post("hook") { [self] request, _ -> Response in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            let status: HTTPResponse.Status = record(Data(buffer: bytes)) ? .ok : .internalServerError
            guard answerBytes > 0 else { return Response(status: status) }
            return Response(status: status, body: ResponseBody(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "x"), count: answerBytes)))
        }
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "kiosk.test-receiver")
        // Cancelled at the end of a test, it logs a harmless "already closed" at error level.
        logger.logLevel = .critical
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []); return nil }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw CancellationError() }
            let result = try await body("http://127.0.0.1:\(port)/hook")
            group.cancelAll()
            return result
        }
    }
}
