import Foundation
import Synchronization
import KioskCommandLine

/// The lines a start prints once its listeners are bound, held until every one of them is: a
/// start that fails on its last listener has said nothing about the others. The store's own line
/// (`listening on …`, what scripts wait for) comes first.
final class StartAnnouncement: Sendable {
    private struct State {
        var remaining: Int
        var lines: [(FileHandle, String)] = []
    }
    private let state: Mutex<State>

    init(expecting listeners: Int) {
        state = Mutex(State(remaining: listeners))
    }

    func say(first: Bool = false, _ lines: [(FileHandle, String)]) {
        let ready = state.withLock { state -> [(FileHandle, String)]? in
            state.lines = first ? lines + state.lines : state.lines + lines
            state.remaining -= 1
            return state.remaining == 0 ? state.lines : nil
        }
        for (handle, line) in ready ?? [] {
            if handle === FileHandle.standardOutput {
                handle.write(Data(line.utf8))
            } else {
                BufferedLog.standardError.write(line)
            }
        }
    }
}

/// Ends the process when a stop (SIGTERM or SIGINT) has not finished `after` the signal: what still
/// runs then waits on something that will not answer (a database connection PostgreSQL dropped
/// half-way, seen under load with connections killed), and a server that ignores SIGTERM is worse
/// than one that exits and says why. A normal stop finishes long before.
final class StopDeadline {
    private let sources: [any DispatchSourceSignal]

    init(after grace: Duration) {
        let seconds = Double(grace.components.seconds)
        sources = [SIGTERM, SIGINT].map { signal in
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
            source.setEventHandler {
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                    BufferedLog.standardError.write("kiosk: the stop still waited on requests \(Int(seconds)) s after the signal (a database connection that stopped answering?); exiting\n")
                    BufferedLog.standardError.flush()
                    exit(EXIT_FAILURE)
                }
            }
            source.resume()
            return source
        }
    }

    deinit {
        for source in sources { source.cancel() }
    }
}
