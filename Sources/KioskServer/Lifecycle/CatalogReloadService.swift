import KioskStore
import Logging
import ServiceLifecycle
import UnixSignals

/// Serves the first catalog once the store listens, then reloads it on every SIGHUP, until the
/// group shuts down.
///
/// The port is bound first and the catalog packed after, so a busy port is said at once rather
/// than after minutes of packing; meanwhile requests are answered 503 `starting`. A catalog that
/// cannot be loaded at start fails this service, and with it the start; one that cannot be
/// reloaded is logged and the last good one keeps serving (``CatalogService/reload()``).
struct CatalogReloadService: Service {
    let catalog: CatalogService
    /// The port the store's HTTP service bound; ends without one when it could not bind.
    let listening: AsyncStream<Int>
    /// Told the port once the first catalog is served.
    let onServing: @Sendable (Int) async -> Void
    /// Told of a reload that changed the catalog: the devices' waiting polls, here and on every instance.
    let changes: ChangeNotifier
    /// Keeps the names KOReader gives each catalog's files, so a reader's place outlives an edition.
    let reading: ReadingProgress
    let logger: Logger

    func run() async throws {
        // Trapped first: until then a SIGHUP would end the process (its default action).
        let hangUps = await UnixSignalsSequence(trapping: .sighup)
        var ports = listening.makeAsyncIterator()
        guard let port = await ports.next() else {
            // The HTTP service failed, and its error ends the group: wait for that, not finish first.
            try? await gracefulShutdown()
            return
        }
        try await catalog.load()
        // Told to stop while packing: the store never served, so it does not say it does.
        guard !Task.isShuttingDownGracefully else { return }
        await rememberDocuments()
        await onServing(port)
        for await _ in hangUps.cancelOnGracefulShutdown() {
            if await catalog.reloadReportingChange() {
                changes.catalogChanged(tellOthers: true)
                await rememberDocuments()
            }
        }
    }

    /// Only a device's place in a book of an earlier edition depends on it: a failure is logged.
    private func rememberDocuments() async {
        do {
            try await reading.remember(documents: try await catalog.current.productsByDocument)
        } catch {
            logger.warning("the catalog's document names were not kept; a device reading an earlier edition may start a new place", metadata: ["error": "\(error)"])
        }
    }
}
