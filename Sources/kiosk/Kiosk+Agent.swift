import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient
import Synchronization

extension Kiosk {
    struct Agent: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stay running and deliver on your own: retries, syncs, new issues, refunds, approvals.",
            discussion: """
                Retries each waiting download when it is due, syncs the catalog every --sync-interval seconds, \
                downloads newly published issues of subscriptions and new versions of installed products, and \
                learns of changes to the account (an approval, a refund, a purchase on another device) within \
                seconds. Other kiosk commands may run on the same home meanwhile; one agent runs per home.

                SIGTERM or Ctrl-C stops it at once; a download it was running keeps its bytes (waiting).

                Exit status: 0 stopped, 1 failed, 2 another agent runs on this home (or a usage error).

                Example: kiosk agent --sync-interval 300
                """
        )

        @OptionGroup var options: ClientOptions

        @Option(help: "Seconds between two catalog syncs.")
        var syncInterval: Double = 300

        @Flag(help: "Do one round (sync, replay, due downloads) and exit, for cron.")
        var once = false

        func validate() throws {
            // At least a second: the catalog is cheap to ask for (a 304), not free; at most a week.
            guard syncInterval >= 1, syncInterval <= 7 * 86_400 else {
                throw ValidationError("--sync-interval must be between 1 and 604800 seconds (a week)")
            }
        }

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                _ = try client.server()
                let lock: AgentLock
                do {
                    lock = try AgentLock.acquire(in: client.home)
                } catch let refusal as AgentLock.Refusal {
                    standardError("\(refusal)")
                    throw ExitCode(2)
                }
                defer { lock.release() }
                if !once { standardError("agent running (PID \(getpid())) on \(client.home.root.path); SIGTERM or Ctrl-C stops it") }
                let runner = DownloadRunner(client: client)
                let interval = Duration.milliseconds(Int64(syncInterval * 1000))
                let once = once
                // The whole command runs under `cancellingOnInterrupt` (Kiosk.main): SIGTERM or
                // Ctrl-C cancels this task, and the agent's loop ends at its next await.
                let unreachable = Mutex(false)
                do {
                    try await client.run(syncInterval: interval, once: once) { step in
                        if case .offline(let wait) = step, wait == .zero {
                            unreachable.withLock { $0 = true }
                        } else {
                            Self.report(step, runner: runner)
                        }
                    }
                } catch is CancellationError {}
                if !once { print("agent stopped; waiting downloads keep their bytes") }
                // For cron: a round that could not reach the store says so and exits 3 (partly done).
                if once, unreachable.withLock({ $0 }) {
                    standardError("the store at \(try client.server()) cannot be reached; nothing was tried, the next run tries again")
                    throw ExitCode(3)
                }
            }
        }

        static func report(_ step: AgentStep, runner: DownloadRunner) {
            switch step {
            case .synced(let report):
                for id in report.added { print("new in the catalog: \(id)") }
                for id in report.changed { print("updated in the catalog: \(id)") }
            case .replayed(let report):
                for id in report.revoked {
                    if report.revokedCredits.contains(id) {
                        print("\(id): the store revoked this purchase; its credits were taken off the balance")
                    } else if report.revokedKept.contains(id) {
                        print("\(id): the store revoked this purchase; its content stays in the library, covered by another purchase or a subscription")
                    } else {
                        print("\(id): the store revoked this purchase; its content was removed from the library")
                    }
                }
                for id in report.declined { print("\(id): the Ask to Buy request was declined; nothing was charged") }
                let approved = report.deferredResolved - report.declined.count
                if approved > 0 { print("\(approved) Ask to Buy request(s) approved") }
                for id in Set(report.refused).subtracting(report.declined).sorted() { print("\(id): the store refused this purchase; nothing was charged") }
                if report.sent > 0 { print("\(report.sent) purchase(s) saved while offline sent to the store") }
                if report.finished > 0 { print("\(report.finished) delivered purchase(s) finished with the store") }
                for record in report.arrived { print("\(record.productId): bought on another device or renewed by the store; receipt saved (transaction \(record.transactionId ?? "-"))") }
                for problem in report.notTakenIn + report.heldForOtherStore + report.heldForOtherAccount { print(problem) }
                if let account = report.signedOut { print(DownloadRunner.signedOut(account, email: nil)) }
            case .queued(let products):
                for id in products { print("queued \(id)") }
            case .deferred(let reason):
                print("automatic downloads wait: \(reason)")
            case .removedForRoom(let products):
                for id in products { print("removed \(id) from this device to make room under keep-free; it stays yours (kiosk resume \(id) gets it back)") }
            case .removed(let products):
                for id in products { print("removed \(id) from this device by its title's keep rule; it stays yours (kiosk resume \(id) gets it back)") }
            case .ran(let round):
                runner.report(round)
            case .offline(let wait):
                print("the store cannot be reached; trying again in \(wait.components.seconds) s")
            case .accountChanged, .sleeping:
                break
            }
            fflush(nil)
        }
    }
}
