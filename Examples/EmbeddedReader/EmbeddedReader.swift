// An app that embeds Kiosk's client engine: it opens a home, syncs the catalog, buys one
// product (the engine saves the signed receipt before it finishes the purchase), watches the
// download's progress on the engine's event stream, and lists the library. It uses only
// KioskClient's public API, as an app would; CI builds it and a test runs it against a live store.
//
//     embedded-reader <store URL> <home folder> <product ID>
import Foundation
import KioskClient

@main
struct EmbeddedReader {
    static func main() async {
        let arguments = CommandLine.arguments.dropFirst()
        guard arguments.count == 3 else {
            FileHandle.standardError.write(Data("usage: embedded-reader <store URL> <home folder> <product ID>\n".utf8))
            exit(2)
        }
        let (server, folder, productId) = (arguments[arguments.startIndex], arguments[arguments.startIndex + 1], arguments[arguments.startIndex + 2])
        do {
            let client = try KioskClient(home: KioskHome(root: URL(fileURLWithPath: folder)), server: server)
            // The engine reports every committed state change and progress in order; this
            // watcher prints them until the purchase is finished on the store.
            let events = client.events
            let watcher = Task {
                for await event in events {
                    switch event {
                    case .transaction(let record):
                        print("purchase of \(record.productId): \(record.state.rawValue)")
                        if record.productId == productId, record.state == .finished || record.state == .failed { return }
                    case .download(let record): print("download of \(record.productId): \(record.state.rawValue)")
                    case .removed(let record): print("removed from the device: \(record.productId) (still owned)")
                    case .progress, .downloadRemoved: break
                    }
                }
            }
            let synced = try await client.sync()
            print("catalog: \(synced.added.count) added, \(synced.changed.count) changed")
            // Whatever an earlier run left unfinished (a purchase whose answer was lost, a
            // download cut short) is moved on first, as an app does at launch.
            _ = await client.replay()
            let bought = try await client.buy(productId)
            // A new purchase's events are all published before buy returns; the watcher may
            // still be printing them. One already owned changes nothing and has none.
            if bought.alreadyOwned { watcher.cancel() } else { await watcher.value }
            print("bought \(productId): \(bought.outcome)\(bought.alreadyOwned ? " (already owned: nothing charged)" : "")")
            for entry in try client.libraryEntries() {
                print("library: \(entry.item.productId) \(entry.item.version) at \(entry.item.path)")
            }
            exit(bought.outcome == .complete ? 0 : 1)
        } catch {
            FileHandle.standardError.write(Data("embedded-reader: \(error)\n".utf8))
            exit(1)
        }
    }
}
