import ArgumentParser
import Foundation
import KioskCommandLine
import KioskServer
import KioskStore
import Logging

/// Where the store's database is: the `--database` flag shared by `serve` and `keys`.
struct StoreDatabaseOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The store's database: sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DB; default sqlite in --data ($KIOSK_DATABASE).", valueName: "url"))
    var database = ProcessInfo.processInfo.environment["KIOSK_DATABASE"].flatMap { $0.isEmpty ? nil : $0 }

    func location() throws -> DatabaseLocation? {
        guard let database else { return nil }
        do {
            return try DatabaseLocation(parsing: database)
        } catch {
            throw ValidationError("--database: \(error)")
        }
    }
}

extension KioskServerTool {
    struct Publish: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pack the store once into an origin folder that instances, nginx and CDNs serve as it is.",
            discussion: """
                Writes OUT/archives/<sha256>.<ext> (content-addressed, never rewritten) and then \
                OUT/catalog.json. Run it again after editing the catalog or content: only what changed \
                is packed; then send SIGHUP to every `kiosk serve --published OUT`.

                Example: kiosk publish --catalog Catalog --content Content --out /srv/kiosk/published
                """
        )

        @Option(help: ArgumentHelp("The folder of catalog .json files.", valueName: "dir"))
        var catalog = "Catalog"

        @Option(help: ArgumentHelp("The folder of content folders and archives.", valueName: "dir"))
        var content = "Content"

        @Option(help: ArgumentHelp("The origin folder to write.", valueName: "dir"))
        var out: String

        @Option(name: .customLong("remove-withdrawn"), help: ArgumentHelp(
            "A product gone from the catalog files whose owners may no longer download it (repeatable); kiosk admin products owners ID says how many they are.",
            valueName: "id"))
        var removeWithdrawn: [String] = []

        func run() async throws {
            LogSetup.bootstrap()
            try await reportingErrors {
                let folder = PublishedFolder(URL(fileURLWithPath: out))
                let published = try folder.publish(
                    catalog: URL(fileURLWithPath: catalog), content: URL(fileURLWithPath: content), removing: removeWithdrawn, logger: Logger(label: "kiosk.publish"))
                let offSale = published.products.values.filter { $0.forSale == false }.count
                print("published \(published.products.count) products (\(published.archives.count) archives) to \(folder.url.path); catalog ETag \(published.etag)")
                if offSale > 0 { print("\(offSale) of them off sale, delivered only to their owners") }
                for id in removeWithdrawn { print("removed \(id): its owners can no longer download it") }
            }
        }
    }

    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List, rotate and retire the receipt signing keys every instance shares.",
            subcommands: [List.self, Rotate.self, Retire.self],
            defaultSubcommand: List.self
        )

        struct Target: ParsableArguments {
            @OptionGroup var store: StoreDatabaseOptions

            @Option(help: ArgumentHelp("The server's data folder, whose SQLite database is the default ($KIOSK_DATA).", valueName: "dir"))
            var data = ProcessInfo.processInfo.environment["KIOSK_DATA"].flatMap { $0.isEmpty ? nil : $0 } ?? ".kiosk-server"

            func open() async throws -> KeyRegistry {
                LogSetup.bootstrap()
                let location = try store.location() ?? .sqlite(path: URL(fileURLWithPath: data).appendingPathComponent("kiosk-server.sqlite").path)
                // The keys of a store that exists: a mistyped --data must not make a new store
                // whose "rotated" key no instance will ever read.
                if case .sqlite(let path) = location, !FileManager.default.fileExists(atPath: path) {
                    throw ValidationError("no store at \(path); pass the --data folder of a store that has run (or its --database)")
                }
                return try await KeyRegistry.open(location, logger: Logger(label: "kiosk.keys"))
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every key: its kid, when it was made, and whether it still verifies.")
            @OptionGroup var target: Target

            func run() async throws {
                try await reportingErrors {
                    let registry = try await target.open()
                    let keys: [SigningKeys.KeyInfo]
                    do {
                        keys = try await registry.list()
                    } catch {
                        await registry.close()
                        throw error
                    }
                    await registry.close()
                    let signing = keys.last { $0.retiredAt == nil }?.kid
                    for key in keys {
                        let state = key.retiredAt != nil ? "retired" : (key.kid == signing ? "signing" : "verifying")
                        print("\(key.kid)\t\(state)\tcreated \(ISO8601DateFormatter().string(from: key.createdAt))")
                    }
                }
            }
        }

        struct Rotate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Add a key that signs from now on; receipts signed before keep verifying.",
                discussion: "Every instance starts signing with it within a few seconds, and verifies it at once.")
            @OptionGroup var target: Target

            func run() async throws {
                try await reportingErrors {
                    let registry = try await target.open()
                    do {
                        let kid = try await registry.rotate()
                        print("signing with \(kid) from now on")
                    } catch {
                        await registry.close()
                        throw error
                    }
                    await registry.close()
                }
            }
        }

        struct Retire: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Stop trusting a key: the receipts it signed stop verifying.",
                discussion: """
                    Says how many live purchases carry a receipt signed by the key. The purchases stand: the \
                    store hands each one out again signed with the current key when its device lists or \
                    restores its transactions. Until then a download that shows the old receipt is refused \
                    (401, naming the key), and `kiosk restore` on that device fetches the new receipt.
                    """)
            @OptionGroup var target: Target
            @Argument(help: "The key's kid, as kiosk keys list shows it.") var kid: String

            func run() async throws {
                try await reportingErrors {
                    let registry = try await target.open()
                    do {
                        let live = try await registry.retire(kid)
                        print("retired \(kid); \(live) live \(live == 1 ? "purchase carries a receipt" : "purchases carry receipts") signed by it, re-signed with the current key on their next restore")
                    } catch {
                        await registry.close()
                        throw error
                    }
                    await registry.close()
                }
            }
        }
    }
}
