import Foundation
import HTTPTypes
import Hummingbird
import KioskTransfer
import NIOCore

/// Forwards GET requests to a live store, running a test's hook before each is forwarded: so a
/// test can change the server between two requests of one client operation (replace a version
/// between an update's manifest and its ranges, say) without timing it.
public final class ForwardingProxy: Sendable {
    /// Called with each request's target (path and query) and whether it asks for a range,
    /// before the request is forwarded.
    public typealias Hook = @Sendable (_ target: String, _ isRange: Bool) async -> Void

    private let upstream: String
    private let hook: Hook

    private init(upstream: String, hook: @escaping Hook) {
        self.upstream = upstream
        self.hook = hook
    }

    /// Runs on 127.0.0.1 and a free port for the length of `body`, which gets the proxy's base URL.
    public static func run<T: Sendable>(to upstream: String, hook: @escaping Hook, _ body: @Sendable (String) async throws -> T) async throws -> T {
        let proxy = ForwardingProxy(upstream: upstream, hook: hook)
        let router = Router(context: BasicRequestContext.self)
        router.get("**") { request, _ in try await proxy.forward(request) }
        return try await LoopbackServer.run(router, label: "kiosk.test-proxy") { port in
            try await body("http://127.0.0.1:\(port)")
        }
    }

    private func forward(_ request: Request) async throws -> Response {
        let target = request.uri.string
        var headers: [(name: String, value: String)] = []
        for field in request.headers where ["authorization", "range", "if-range", "if-match", "if-none-match"].contains(field.name.canonicalName) {
            headers.append((field.name.rawName, field.value))
        }
        await hook(target, request.headers[.range] != nil)
        let answer = try await HTTPClient().send(KioskTransfer.HTTPRequest(url: upstream + target, headers: headers, timeout: 60, maxResponseBytes: 256 << 20))
        // The body is passed on as the proxy's own client received it (decoded): its encoding is not.
        var fields = HTTPFields()
        for (name, value) in answer.headers where !["content-length", "content-encoding", "transfer-encoding", "connection"].contains(name.lowercased()) {
            if let fieldName = HTTPField.Name(name) { fields[fieldName] = value }
        }
        return Response(status: .init(code: answer.status), headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}
