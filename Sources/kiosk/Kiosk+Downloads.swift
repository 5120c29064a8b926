import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient
import KioskCore

extension Kiosk {
    struct Downloads: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List content downloads: state, bytes, attempts, next attempt, last error; works offline.",
            discussion: "Example: kiosk downloads --json"
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print the downloads as JSON.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                let downloads = try client.downloads()
                if json {
                    let rows = downloads.map { Row(record: $0) }
                    print(String(decoding: try JSONEncoder.kiosk.encode(rows), as: UTF8.self))
                    return
                }
                if let agent = AgentLock.runningAgent(in: client.home) {
                    let next = try client.nextDownloadAttempt().map { "; next retry at \(DownloadRunner.time($0))" } ?? ""
                    print("agent running (PID \(agent)): retries waiting downloads when due\(next)")
                }
                if downloads.isEmpty { print("no downloads") }
                for record in downloads {
                    var line = "\(record.productId)  \(record.state.rawValue)  \(ByteCount.text(record.bytesDone))/\(ByteCount.text(record.size))"
                    if record.attempts > 0 { line += "  attempts \(record.attempts)" }
                    if let next = record.nextAttemptAt, record.state == .waiting { line += "  next \(DownloadRunner.time(next))" }
                    if let error = record.lastError, record.state != .installed { line += "  (\(error))" }
                    if let note = record.transferNote, record.state == .installed { line += "  (\(note))" }
                    print(line)
                }
            }
        }

        struct Row: Encodable {
            var productId: String
            var state: DownloadState
            var bytesDone: Int64
            var totalBytes: Int64
            var version: String
            var attempts: Int
            var nextAttemptAt: Date?
            var lastError: String?
            /// "update 1.2 MB of 212 MB (3 files changed)" after an update by entries.
            var transferNote: String?

            init(record: DownloadRecord) {
                productId = record.productId
                state = record.state
                bytesDone = record.bytesDone
                totalBytes = record.size
                version = record.version
                attempts = record.attempts
                nextAttemptAt = record.nextAttemptAt
                lastError = record.lastError
                transferNote = record.transferNote
            }
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run due downloads and unfinished transactions; install updated content.",
            discussion: """
                With --wait it sleeps until waiting downloads are due and goes on until every download is \
                installed or has failed for good (or --max-wait runs out).

                Exit status: 0 all installed, 1 a download failed for good, 3 downloads still waiting.

                Example: kiosk resume --wait --max-wait 600
                """
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Wait for waiting downloads and retry them when due.")
        var wait = false

        @Option(help: "With --wait: give up after this many seconds.")
        var maxWait: Int = 3600

        @Flag(help: "Print what was done as JSON (docs/client.md), instead of a line per step.")
        var json = false

        @Argument(help: "Only this product: one the newsstand or kiosk cancel removed is downloaded again.")
        var product: String?

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                _ = try client.server()
                if let product {
                    guard let record = try client.downloads().first(where: { $0.productId == product }) else {
                        throw ClientError.invalidRequest("\(product) has no download on this device: buy it, or kiosk restore if it was bought on another")
                    }
                    // Removed, or waiting for its next try: the reader's word makes it due now.
                    if record.state == .removed || record.state == .waiting { _ = try client.reinstate(product) }
                    if !wait, !json {
                        try await Self.resumeOne(product, wasRemoved: record.state == .removed, client: client)
                        return
                    }
                }
                var configured = DownloadRunner(client: client)
                configured.context = .resume(waits: wait)
                let runner = configured
                let deadline = wait ? Date().addingTimeInterval(TimeInterval(maxWait)) : nil
                let json = self.json
                let report = try await runner.showingProgress {
                    try await client.resume(until: deadline, step: { step in
                        guard !json else { return }
                        switch step {
                        case .queued(let products):
                            for id in products { runner.say("queued \(id)") }
                        case .ran(let round):
                            runner.report(round)
                        case .waiting:
                            break
                        }
                    })
                }
                let downloads = (try? client.downloads()) ?? []
                DownloadRunner.tell(report.replay, email: try? client.accountEmail())
                if json {
                    try JSONOutput.print(JSONOutput.Resume(
                        queued: report.queued, downloads: JSONOutput.Downloads(report.downloads, records: downloads),
                        failedEarlier: report.failedEarlier, outcome: report.outcome.name))
                } else {
                    for product in report.unsent {
                        if report.replay.signedOut != nil {
                            print("\(product): purchase saved; it is sent once this device is signed in to its account again")
                        } else if report.replay.offline {
                            print("\(product): purchase saved; the store cannot be reached, so it is sent as soon as it can be")
                        } else {
                            // The store answered, and could not take it now (a 503, its database down).
                            print("\(product): purchase saved; the store could not take it now, so it is sent again, with the same key, at its next try (kiosk transactions says why)")
                        }
                    }
                    if report.interruptedWhileWaiting { print("interrupted while waiting; nothing was lost") }
                }
                // What failed for good before this run is not run again: named, so exit status 1 is explained.
                for id in report.failedEarlier {
                    let error = downloads.first { $0.productId == id }?.lastError ?? "the download failed"
                    standardError("\(id): failed for good earlier (\(error)); kiosk restore downloads it again, kiosk cancel \(id) drops it")
                }
                try report.outcome.exit()
            }
        }

        /// `kiosk resume ID`: that product alone, queued again first when its files were removed.
        static func resumeOne(_ product: String, wasRemoved: Bool, client: KioskClient) async throws {
            let runner = DownloadRunner(client: client)
            if wasRemoved { runner.say("queued \(product) again (its title's keep rule may remove it again at the next tidy: kiosk pin \(product) keeps it)") }
            let report = try await runner.showingProgress { try await client.runDownloads(only: [product]) }
            runner.report(report)
            try report.outcome.exit()
        }
    }

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pause a download; it keeps its bytes and continues after kiosk resume.",
            discussion: "Example: kiosk pause com.kiosk.books.river-of-maps"
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID.")
        var product: String

        func run() async throws {
            try await reportingErrors {
                let record = try options.client().pauseDownload(product)
                print("\(record.productId): paused at \(ByteCount.text(record.bytesDone))")
            }
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel a download and delete its partial bytes, remove an installed product's files, or cancel a purchase never sent.",
            discussion: """
                An installed product's files are removed from this device; it stays yours, and \
                kiosk resume ID downloads it again.

                With --purchase it cancels a purchase saved on this device that was never sent to its \
                store (nothing was charged); one that was sent and is waiting for its answer is not \
                cancelled, since it may have been charged.

                Example: kiosk cancel com.kiosk.books.river-of-maps; kiosk cancel --purchase com.kiosk.books.river-of-maps
                """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID.")
        var product: String

        @Flag(help: "Cancel the product's saved purchase that was never sent, instead of its download.")
        var purchase = false

        func run() async throws {
            try await reportingErrors {
                if purchase {
                    let record = try options.client().cancelUnsentPurchase(product)
                    print("\(record.productId): the purchase saved on this device was cancelled; it was never sent, so nothing was charged")
                    return
                }
                let client = try options.client()
                // Installed: its files are freed, the purchase stays (the newsstand's removal).
                if try client.downloads().first(where: { $0.productId == product })?.state == .installed, try client.removeFromDevice(product) {
                    print("\(product): removed from this device; it stays yours, and kiosk resume \(product) downloads it again")
                    return
                }
                let record = try client.cancelDownload(product)
                print("\(record.productId): cancelled")
            }
        }
    }

    struct Library: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List installed books and issues: version and where they are; works offline.",
            discussion: "Example: kiosk library --json; kiosk library --path com.kiosk.books.river-of-maps"
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print the library as JSON.")
        var json = false

        @Option(name: .customLong("path"), help: ArgumentHelp("Print only where this product's files are (as kiosk open ID).", valueName: "id"))
        var pathOf: String?

        @Flag(help: "Remove the files of the issues the keep rules let go now (what kiosk agent does after it installs); they stay yours.")
        var tidy = false

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                if let pathOf {
                    print(try LibraryPath.find(pathOf, in: client))
                    return
                }
                if tidy {
                    let removed = try client.tidy()
                    if removed.isEmpty { print("nothing to remove: every title keeps what its rule keeps") }
                    for id in removed { print("removed \(id) from this device; it stays yours (kiosk resume \(id) gets it back)") }
                    return
                }
                let entries = try client.libraryEntries()
                if json {
                    let rows = entries.map { Row(productId: $0.item.productId, title: $0.title, version: $0.item.version, path: $0.item.path, installedAt: $0.item.installedAt, updateAvailable: $0.updateAvailable) }
                    print(String(decoding: try JSONEncoder.kiosk.encode(rows), as: UTF8.self))
                    return
                }
                if entries.isEmpty { print("the library is empty") }
                for entry in entries {
                    let update = entry.updateAvailable ? "  (update available: kiosk resume)" : ""
                    print("\(entry.item.productId)  \(entry.title ?? "")  version \(entry.item.version)  \(entry.item.path)\(update)")
                }
                for shelf in try client.newsstand() {
                    print("")
                    print("\(shelf.series): \(shelf.frequency.rawValue); keeps \(shelf.rule.description)\(shelf.ruleIsSet ? "" : " (the default; kiosk keep \(shelf.series) --last N changes it)")")
                    for issue in shelf.issues {
                        var notes = [issue.state.rawValue]
                        if issue.pinned { notes.append("pinned") }
                        if issue.boughtAlone { notes.append("bought") }
                        if issue.goesNext { notes.append("removed at the next tidy") }
                        print("  \(issue.productId)  \(issue.publicationDate)  \(ByteCount.text(issue.size))  \(notes.joined(separator: ", "))")
                    }
                }
            }
        }

        struct Row: Encodable {
            var productId: String
            var title: String?
            var version: String
            var path: String
            var installedAt: Date
            var updateAvailable: Bool
        }
    }

    struct Pin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pin a book or issue: no keep rule removes its files; a removed one is downloaded again.",
            discussion: "Example: kiosk pin com.kiosk.magazines.harbor-monthly.issue-01"
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID.")
        var product: String

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                let before = try client.downloads().first { $0.productId == product }?.state
                _ = try client.pin(product)
                print(before == .removed ? "\(product): pinned, and queued again (kiosk resume \(product) downloads it now)" : "\(product): pinned")
            }
        }
    }

    struct Unpin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unpin a book or issue: its title's keep rule applies to it again.",
            discussion: "Example: kiosk unpin com.kiosk.magazines.harbor-monthly.issue-01"
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID.")
        var product: String

        func run() async throws {
            try await reportingErrors {
                _ = try options.client().unpin(product)
                print("\(product): unpinned")
            }
        }
    }

    struct Keep: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Say how many of a title's issues this device keeps: the last N, or those of the last N days.",
            discussion: """
                Without a rule a title keeps NOOK's default for how often it comes out: 10 daily or weekly \
                issues, 12 monthly, 6 bimonthly, 4 quarterly. A title's newest issue, pinned issues \
                (kiosk pin) and issues bought on their own are always kept; an issue removed stays yours \
                (kiosk resume ID). kiosk agent applies the rules after it installs; kiosk library --tidy now.

                Example: kiosk keep com.kiosk.magazines.harbor-monthly --last 6; kiosk keep com.kiosk.magazines.harbor-monthly --default
                """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The title's series ID (kiosk library lists them).")
        var series: String

        @Option(help: ArgumentHelp("Keep the last N issues.", valueName: "N"))
        var last: Int?

        @Option(help: ArgumentHelp("Keep the issues published in the last N days.", valueName: "N"))
        var days: Int?

        @Flag(help: "Go back to the default for the title's frequency.")
        var `default` = false

        func validate() throws {
            guard [last != nil, days != nil, `default`].filter({ $0 }).count <= 1 else {
                throw ValidationError("give one of --last N, --days N or --default")
            }
        }

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                if let last {
                    try client.setKeepRule(.lastIssues(last), forSeries: series)
                } else if let days {
                    try client.setKeepRule(.days(days), forSeries: series)
                } else if `default` {
                    try client.setKeepRule(nil, forSeries: series)
                }
                let rule = try client.keepRules()[series]
                let shelf = try client.newsstand().first { $0.series == series }
                let effective = rule ?? shelf?.rule
                print("\(series): keeps \(effective?.description ?? "its frequency's default")\(rule == nil ? " (the default)" : "")")
            }
        }
    }
}
