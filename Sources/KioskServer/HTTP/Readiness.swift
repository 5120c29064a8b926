import Foundation
import Hummingbird
import KioskStore

/// Whether the store can serve (`GET /healthz`), as a load balancer or systemd asks it, apart from
/// whether the process is alive (`GET /livez`): its database answers, its catalog is loaded and
/// it has a receipt signing key. An instance that is alive but cannot serve answers 503 naming
/// what it lacks, so it is taken out of rotation rather than restarted.
struct Readiness: Sendable {
    let store: Store
    let catalog: CatalogService

    /// What keeps the store from serving now; empty when it can.
    func problems() async -> [String] {
        var problems: [String] = []
        do { try await store.ping() } catch { problems.append("database unreachable (\(Store.describe(error)))") }
        do { _ = try await catalog.storeProducts() } catch { problems.append("catalog not loaded (\(error))") }
        if (try? await store.keys.currentPolicy()) == nil { problems.append("no receipt signing key") }
        return problems
    }

    func respond() async -> Response {
        let problems = await problems()
        let body = problems.isEmpty ? "ok" : "not ready: " + problems.joined(separator: "; ")
        return Response(status: problems.isEmpty ? .ok : .serviceUnavailable,
                        headers: [.contentType: "text/plain; charset=utf-8", .cacheControl: "no-store"],
                        body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}
