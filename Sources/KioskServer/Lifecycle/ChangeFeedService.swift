import KioskStore
import Logging
import Synchronization
import ServiceLifecycle

/// Keeps the account change feed's long polls awake to every change of the store.
///
/// On PostgreSQL it holds one connection that `LISTEN`s for the notifications every instance
/// sends after it commits a change of an account's transactions (``ChangeBroadcast``,
/// ``Accounts/listenForChanges(logger:listening:received:)``) and signals them to this process's
/// waiting polls, so a refund made through instance A wakes the devices waiting on B. A lost
/// connection is opened again after a second; every waiting poll is woken when it is lost and again
/// once the new `LISTEN` is in place: what was committed in between was not heard, and a poll that
/// finds nothing new simply answers empty. On SQLite (one process) it has nothing to listen to.
///
/// On graceful shutdown it wakes every waiting poll, so the server stops at once instead of after
/// the longest wait. The application runs the one that listens; `kiosk serve`'s group adds one
/// that does not listen after the HTTP service, so it is told of the shutdown first (a group
/// stops its services last to first), before the HTTP service waits for its requests in flight.
struct ChangeFeedService: Service {
    let store: Store
    var changes: ChangeNotifier { store.changes }
    /// Reloaded when another instance says its catalog changed (a `kiosk publish` into a shared
    /// folder needs one SIGHUP, not one per instance); nil for the service that does not listen.
    var catalog: CatalogService? = nil
    let listens: Bool
    let logger: Logger

    func run() async throws {
        await withGracefulShutdownHandler {
            await listen()
            // SQLite, or shut down: stay until the group stops.
            try? await gracefulShutdown()
        } onGracefulShutdown: {
            changes.close()
        }
    }

    /// Another instance's catalog changed: this one reloads its own, and wakes its polls when that
    /// changed what it serves (never telling the others again: they heard the same notice).
    private static func reload(_ catalog: CatalogService?, _ changes: ChangeNotifier) {
        guard let catalog else { return }
        Task {
            if await catalog.reloadReportingChange() { changes.catalogChanged(tellOthers: false) }
        }
    }

    private func listen() async {
        guard listens, store.accounts.hearsOtherInstances else { return }
        let changes = changes
        // Warned once per outage, not once per attempt while PostgreSQL stays away.
        let warned = Atomic<Bool>(false)
        var reconnecting = false
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            let again = reconnecting
            do {
                try await cancelWhenGracefulShutdown {
                    try await store.accounts.listenForChanges(logger: logger, listening: {
                        warned.store(false, ordering: .relaxed)
                        // What was committed while no LISTEN was in place was not heard: the polls
                        // that came in meanwhile read the feed again now.
                        if again {
                            store.accounts.forgetRememberedTokens()
                            changes.wakeAll()
                        }
                    }) { payload in
                        if payload == ChangeNotifier.catalogNotice {
                            Self.reload(catalog, changes)
                        } else if store.accounts.heardDevicesChanged(payload) {
                            // A device removed elsewhere: its tokens are forgotten here and its polls woken.
                        } else {
                            changes.signal(payload)
                        }
                    }
                }
                return
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                if !warned.exchange(true, ordering: .relaxed) {
                    logger.warning("the change feed lost its PostgreSQL connection; listening again", metadata: ["error": "\(Store.describe(error))"])
                }
                // Removals announced while no LISTEN is in place go unheard: tokens are looked up again.
                store.accounts.forgetRememberedTokens()
                changes.wakeAll()
                reconnecting = true
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}
