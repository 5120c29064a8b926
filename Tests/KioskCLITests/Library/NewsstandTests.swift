import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The newsstand on the device (issue 67): a weekly title's year through the store's sandbox
/// clock, its keep rule applied by the agent, pins and single purchases kept, what was removed
/// still owned; two processes tidying one home; a reader's own removal and `kiosk resume ID`.
@Suite("The newsstand: keep rules, pins and tidying on the device")
struct NewsstandTests {
    static let plan = SampleStore.harborMonthly
    static let series = SampleStore.harborSeries

    /// yyyy-MM-dd, `weeks` weeks from today (UTC).
    static func day(weeks: Int, from now: Date = Date()) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd"
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: now.addingTimeInterval(Double(weeks * 7) * 86_400))
    }

    struct Device {
        let home: URL
        var environment: [String: String] { ["KIOSK_HOME": home.path] }

        func run(_ arguments: [String]) async throws -> KioskCommand.Result {
            try await KioskCommand.run(arguments, environment: environment)
        }

        /// The device's download states, by product.
        func states() async throws -> [String: String] {
            let listed = try await run(["downloads", "--json"])
            let rows = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
            return Dictionary(rows.compactMap { row in (row["productId"] as? String).map { ($0, row["state"] as? String ?? "") } }) { first, _ in first }
        }
    }

    @Test("a year of a weekly title through the sandbox clock: the agent keeps the newest 10 the subscription brought, beside two pins and an issue bought alone; what it removed is still owned and comes back with kiosk resume ID; two tidies at once agree")
    func yearOfWeeklyIssues() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        // A weekly title: 4 back issues and a year ahead (the series' monthly issues stay too; the
        // median gap makes it weekly).
        let now = Date()
        let weeks = Array(-4..<48)
        try store.editHarborMonthly(graceDays: nil, issues: weeks.map { (suffix: "week\($0 < 0 ? "m" : "")\(abs($0))", day: Self.day(weeks: $0, from: now)) })
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let device = Device(home: directory.path("device"))
        #expect(try await device.run(["sync", "--server", server.url]).status == 0)
        // A back issue bought on its own, then the subscription.
        let back = "\(Self.series).weekm2"
        #expect(try await device.run(["buy", back]).status == 0)
        let subscribed = try await device.run(["buy", Self.plan])
        #expect(subscribed.status == 0, "\(subscribed.stderr)")
        let account = try await device.run(["account"]).stdout.split(separator: "\n").first.map { String($0.dropFirst("account: ".count)) } ?? ""
        let admin = ["--server", server.url, "--data", store.data.path]

        var pinned: [String] = []
        for month in 0..<12 {
            // The agent's round: the renewal's receipt taken in, the issues it covers installed, the rule applied.
            let round = try await device.run(["agent", "--once"])
            #expect(round.status == 0 || round.status == 3, "month \(month): \(round.stdout) \(round.stderr)")
            if month == 1 {
                // Two early issues pinned while they are installed.
                let installed = try await device.states().filter { $0.value == "installed" && $0.key.contains(".week") && $0.key != back }.keys.sorted()
                pinned = Array(installed.prefix(2))
                for id in pinned { #expect(try await device.run(["pin", id]).status == 0) }
            }
            #expect(try await KioskCommand.run(["admin", "sandbox", account, "--advance", "31d"] + admin).status == 0)
            // The store's worker renews on its own (every second in the sandbox): counted on the store.
            var renewals = 0
            for _ in 0..<300 where renewals < month + 1 {
                let listed = try await KioskCommand.run(["admin", "transactions", "--json", "--product", Self.plan] + admin)
                renewals = ((try? JSONDecoder.kiosk.decode([AdminTransactionRow].self, from: Data(listed.stdout.utf8))) ?? []).filter { $0.paymentMethod == "renewal" }.count
                if renewals < month + 1 { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(renewals == month + 1, "month \(month): the subscription renewed")
        }
        let last = try await device.run(["agent", "--once"])
        #expect(last.status == 0, "\(last.stdout) \(last.stderr)")

        let states = try await device.states()
        let issues = states.filter { $0.key.hasPrefix(Self.series + ".") }
        let delivered = issues.keys.filter { $0 != back && !pinned.contains($0) }
        // Newest first by the week number in the ID (weekN; the monthly issue-0N are older).
        func week(_ id: String) -> Int {
            guard let range = id.range(of: ".week") else { return -100 }
            let text = id[range.upperBound...]
            return text.hasPrefix("m") ? -(Int(text.dropFirst()) ?? 0) : (Int(text) ?? 0)
        }
        let newestFirst = delivered.sorted { week($0) > week($1) }
        #expect(delivered.count >= 40, "a year of weekly issues was delivered: \(delivered.count)")
        let keep = Set(newestFirst.prefix(10))
        let installed = Set(issues.filter { $0.value == "installed" }.keys)
        #expect(installed == keep.union(pinned).union([back]), "installed: \(installed.sorted()), expected the newest 10 \(keep.sorted()), pins \(pinned), and \(back)")
        #expect(Set(issues.filter { $0.value == "removed" }.keys) == Set(delivered).subtracting(keep), "the rest removed, not forgotten")

        // kiosk library says what each title keeps; a removed issue is still the reader's.
        let library = try await device.run(["library"])
        #expect(library.stdout.contains("\(Self.series): weekly; keeps the last 10 issues (the default"), "\(library.stdout)")
        let oldest = try #require(newestFirst.last)
        let again = try await device.run(["resume", oldest])
        #expect(again.status == 0 && again.stdout.contains("installed \(oldest)"), "\(again.stdout) \(again.stderr)")
        // Brought back by the reader, it is the rule's again at the next tidy: kept if pinned.
        #expect(try await device.run(["pin", oldest]).status == 0)

        // A stricter rule, applied by two tidies at once: they agree, nothing bought or pinned goes.
        #expect(try await device.run(["keep", Self.series, "--last", "3"]).status == 0)
        async let first = device.run(["library", "--tidy"])
        async let second = device.run(["library", "--tidy"])
        let (one, two) = try await (first, second)
        #expect(one.status == 0 && two.status == 0, "\(one.stderr) \(two.stderr)")
        let removedLines = (one.stdout + two.stdout).split(separator: "\n").filter { $0.hasPrefix("removed ") }
        #expect(removedLines.count == 7, "each of the 7 removed once, by one tidy or the other: \(removedLines)")
        let after = try await device.states().filter { $0.key.hasPrefix(Self.series + ".") && $0.value == "installed" }
        #expect(Set(after.keys) == Set(newestFirst.prefix(3)).union(pinned).union([back, oldest]), "\(after.keys.sorted())")
        // The reader's own removal of a pinned issue, and of a book.
        let dropped = try await device.run(["cancel", pinned[0]])
        #expect(dropped.status == 0 && dropped.stdout.contains("removed from this device; it stays yours"), "\(dropped.stdout) \(dropped.stderr)")
        #expect(try await device.states()[pinned[0]] == "removed")
        _ = await server.stop()
    }

    @Test("the agent's own downloads obey the policy: a metered network (NetworkManager's, through busctl) or a battery under its floor holds them, a download the reader starts goes anyway; charging, or a network nothing says is metered, lets them go")
    func downloadPolicy() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        // busctl as NetworkManager would answer it, first on PATH; the battery in a folder of its own.
        let bin = directory.path("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let metered = directory.path("metered")
        let busctl = bin.appendingPathComponent("busctl")
        try "#!/bin/sh\ncat \(metered.path)\n".write(to: busctl, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: busctl.path)
        let supplies = directory.path("power_supply")
        let battery = supplies.appendingPathComponent("BAT0")
        try FileManager.default.createDirectory(at: battery, withIntermediateDirectories: true)
        func power(_ percent: Int, _ status: String) throws {
            try "Battery\n".write(to: battery.appendingPathComponent("type"), atomically: true, encoding: .utf8)
            try "\(percent)\n".write(to: battery.appendingPathComponent("capacity"), atomically: true, encoding: .utf8)
            try "\(status)\n".write(to: battery.appendingPathComponent("status"), atomically: true, encoding: .utf8)
        }
        try power(80, "Discharging")
        try "u 1\n".write(to: metered, atomically: true, encoding: .utf8)
        let path = bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let device = Device(home: directory.path("device"))
        let environment = device.environment.merging(["PATH": path, "KIOSK_POWER_SUPPLY_DIR": supplies.path]) { $1 }
        func kiosk(_ arguments: [String]) async throws -> KioskCommand.Result {
            try await KioskCommand.run(arguments, environment: environment)
        }
        #expect(try await kiosk(["sync", "--server", server.url]).status == 0)
        let books = ["com.kiosk.books.small-engines", "com.kiosk.books.lighthouse-keeper", "com.kiosk.books.night-sky-atlas"]
        for book in books { #expect(try await kiosk(["buy", book, "--no-download"]).status == 0) }
        #expect(try await kiosk(["config", "set", "download-network", "unmetered"]).status == 0)
        #expect(try await kiosk(["config", "set", "battery-floor", "20"]).status == 0)
        let wrong = try await kiosk(["config", "set", "battery-floor", "120"])
        #expect(wrong.status != 0 && wrong.stderr.contains("battery-floor must be a percent from 0 to 100"), "\(wrong.stderr)")

        // Metered: the agent holds its downloads; the reader's own goes.
        let held = try await kiosk(["agent", "--once"])
        #expect(held.stdout.contains("automatic downloads wait: the network is metered"), "\(held.stdout) \(held.stderr)")
        #expect(try await device.states()[books[0]] == "queued")
        let own = try await kiosk(["resume", books[0]])
        #expect(own.status == 0 && own.stdout.contains("installed \(books[0])"), "\(own.stdout) \(own.stderr)")

        // Not metered, but the battery under its floor: held again; charging lets it go.
        try "u 4\n".write(to: metered, atomically: true, encoding: .utf8)
        try power(15, "Discharging")
        let low = try await kiosk(["agent", "--once"])
        #expect(low.stdout.contains("automatic downloads wait: the battery is at 15 %, under the 20 %"), "\(low.stdout) \(low.stderr)")
        #expect(try await device.states()[books[1]] == "queued")
        try power(15, "Charging")
        let charging = try await kiosk(["agent", "--once"])
        #expect(charging.stdout.contains("installed \(books[1])") && charging.stdout.contains("installed \(books[2])"), "\(charging.stdout) \(charging.stderr)")

        // NetworkManager does not answer (busctl fails): not known to be metered, so it goes.
        let fourth = "com.kiosk.books.river-of-maps"
        #expect(try await kiosk(["buy", fourth, "--no-download"]).status == 0)
        try power(80, "Discharging")
        try FileManager.default.removeItem(at: metered)
        #expect(try await device.states()[fourth] == "queued")
        let unknown = try await kiosk(["agent", "--once"])
        #expect(unknown.stdout.contains("installed \(fourth)"), "\(unknown.stdout) \(unknown.stderr)")
        _ = await server.stop()
    }

    @Test("the storage floor holds while a large issue arrives: the oldest issues go first to make room, never the title's newest; what still cannot fit waits and says so, the disk never below the floor; a lower floor lets it in")
    func storageFloor() async throws {
        try #require(SmallDisk.canMount, "the storage floor test mounts a small tmpfs: run make test as root")
        let directory = try TemporaryDirectory()
        let disk = try SmallDisk(at: directory.path("small"), megabytes: 48)
        defer { disk.unmount() }
        let store = try SampleStore(in: directory)
        // Three issues of 3 MiB in the subscription's first days, each its own incompressible content.
        func addIssue(_ suffix: String, days: Int, megabytes: Int) throws {
            let folder = store.content.appendingPathComponent("magazines/harbor-monthly/\(suffix)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try TestOrigin.incompressible(megabytes << 20, seed: suffix).write(to: folder.appendingPathComponent("pages.bin"))
            try store.editCatalog("magazines.json") { products in
                guard var issue = products.first(where: { ($0["id"] as? String)?.hasSuffix("issue-03") == true }) else { return }
                issue["id"] = "\(Self.series).\(suffix)"
                issue["title"] = "Harbor Monthly \(suffix)"
                issue["issueNumber"] = 200 + days
                issue["publicationDate"] = Self.day(weeks: 0, from: Date().addingTimeInterval(Double(days) * 86_400))
                issue["content"] = ["path": "magazines/harbor-monthly/\(suffix)", "format": "tar.gz"]
                products.append(issue)
            }
        }
        for (index, suffix) in ["a", "b", "c"].enumerated() { try addIssue(suffix, days: 1 + index, megabytes: 3) }
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let device = Device(home: disk.path.appendingPathComponent("home"))
        #expect(try await device.run(["sync", "--server", server.url]).status == 0)
        #expect(try await device.run(["buy", Self.plan]).status == 0)
        let first = try await device.run(["agent", "--once"])
        let states = try await device.states()
        for suffix in ["a", "b", "c"] { #expect(states["\(Self.series).\(suffix)"] == "installed", "\(first.stdout) \(first.stderr)") }

        // The publisher's large issue: 8 MiB, which with its unpacked tree needs 16 beside the floor.
        try addIssue("big", days: 5, megabytes: 8)
        server.signal(SIGHUP)
        #expect(try await device.run(["config", "set", "keep-free", "20M"]).status == 0)
        // Something else takes the disk down to about 26 MiB free.
        let filler = disk.path.appendingPathComponent("filler")
        let free = { () -> Int64 in
            var info = statvfs()
            return statvfs(disk.path.path, &info) == 0 ? Int64(info.f_bavail) * Int64(info.f_frsize) : 0
        }
        try Data(count: Int(max(0, free() - (26 << 20)))).write(to: filler)
        var synced = false
        for _ in 0..<100 where !synced {
            _ = try await device.run(["sync"])
            synced = try await device.states()["\(Self.series).big"] != nil
            if !synced { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(synced, "the reload's new issue was queued")
        // 26 MiB free, 16 needed, a floor of 20: even a and b gone (6 MiB) would not make the room,
        // so nothing goes, and the large issue waits, saying why.
        let held = try await device.run(["agent", "--once"])
        var after = try await device.states()
        for suffix in ["a", "b", "c"] { #expect(after["\(Self.series).\(suffix)"] == "installed", "\(after) \(held.stdout)") }
        #expect(after["\(Self.series).big"] == "waiting", "\(held.stdout) \(held.stderr)")
        #expect(held.stdout.contains("and 20.0 MiB more that automatic downloads keep free: kiosk config set keep-free"), "\(held.stdout)")
        #expect(free() >= 20 << 20, "the disk kept its floor: \(free()) bytes free")
        // A floor of 11 MiB: a (the oldest) goes to make the room, b and c (the newest) stay, and the
        // large issue comes in with the disk still above the floor.
        #expect(try await device.run(["config", "set", "keep-free", "11M"]).status == 0)
        // The agent's next rounds, once the waiting download is due again (retries a fraction of a second apart here).
        let soon = device.environment.merging(["KIOSK_RETRY_BASE_SECONDS": "0.1", "KIOSK_RETRY_CAP_SECONDS": "0.2"]) { $1 }
        var made = ""
        for _ in 0..<50 where after["\(Self.series).big"] != "installed" {
            made += try await KioskCommand.run(["agent", "--once"], environment: soon).stdout
            after = try await device.states()
            if after["\(Self.series).big"] != "installed" { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(after["\(Self.series).big"] == "installed", "\(made)")
        #expect(after["\(Self.series).a"] == "removed" && after["\(Self.series).b"] == "installed" && after["\(Self.series).c"] == "installed", "\(after)")
        #expect(made.contains("removed \(Self.series).a from this device to make room under keep-free"), "\(made)")
        #expect(free() >= 11 << 20, "the disk kept its floor: \(free()) bytes free")
        _ = filler
        _ = await server.stop()
    }

    @Test("one at a time, the reader's own purchase goes first (an old issue bought alone), then the subscription's newest issues before older ones")
    func downloadOrder() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editHarborMonthly(graceDays: nil, issues: (1...3).map { (suffix: "day\($0)", day: Self.day(weeks: 0, from: Date().addingTimeInterval(Double($0) * 86_400))) })
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let device = Device(home: directory.path("device"))
        #expect(try await device.run(["sync", "--server", server.url]).status == 0)
        #expect(try await device.run(["buy", Self.plan, "--no-download"]).status == 0)
        // The reader's own: an old issue bought alone (by its ID it would come last).
        let book = "\(Self.series).issue-01"
        #expect(try await device.run(["buy", book, "--no-download"]).status == 0)
        let run = try await KioskCommand.run(["agent", "--once"], environment: device.environment.merging(["KIOSK_CONCURRENCY": "1"]) { $1 })
        let installed = run.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("installed ") else { return nil }
            return line.split(separator: " ").dropFirst().first.map(String.init)
        }
        let issues = (1...3).reversed().map { "\(Self.series).day\($0)" }
        #expect(installed.first == book, "\(run.stdout)")
        #expect(installed.filter { issues.contains($0) } == issues, "newest first: \(installed)")
        _ = await server.stop()
    }

    @Test("a tidy killed mid-removal (its folder moved aside, its row not committed) loses nothing: the issue still counts as installed and its files come back by download; the pinned issue and the one bought alone are never touched")
    func interruptedRemoval() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        try store.editHarborMonthly(graceDays: nil, issues: (1...4).map { (suffix: "day\($0)", day: Self.day(weeks: 0, from: Date().addingTimeInterval(Double($0) * 86_400))) })
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let device = Device(home: directory.path("device"))
        #expect(try await device.run(["sync", "--server", server.url]).status == 0)
        let bought = "\(Self.series).issue-01"
        #expect(try await device.run(["buy", bought]).status == 0)
        #expect(try await device.run(["buy", Self.plan]).status == 0)
        #expect(try await device.run(["resume"]).status == 0)
        let pinned = "\(Self.series).day1"
        #expect(try await device.run(["pin", pinned]).status == 0)
        #expect(try await device.run(["keep", Self.series, "--last", "1"]).status == 0)
        // Killed at the first removal (day2, the oldest the rule lets go), before its row commits.
        let killed = try await KioskCommand.run(["library", "--tidy"], environment: device.environment.merging(["KIOSK_TEST_CRASH_POINT": "mid-removal"]) { $1 })
        #expect(killed.killed, "the tidy was killed at its crash point: \(killed.stdout) \(killed.stderr)")
        var states = try await device.states()
        #expect(states["\(Self.series).day2"] == "installed", "the removal did not commit: \(states)")
        #expect(states[pinned] == "installed" && states[bought] == "installed")
        // The next command finds day2's folder gone and downloads it again; a tidy then removes it for good.
        let repaired = try await device.run(["resume"])
        #expect(repaired.status == 0, "\(repaired.stdout) \(repaired.stderr)")
        let tidied = try await device.run(["library", "--tidy"])
        #expect(tidied.status == 0, "\(tidied.stderr)")
        states = try await device.states()
        #expect(states["\(Self.series).day2"] == "removed" && states["\(Self.series).day3"] == "removed", "\(states)")
        #expect(states["\(Self.series).day4"] == "installed" && states[pinned] == "installed" && states[bought] == "installed", "\(states)")
        for id in [pinned, bought, "\(Self.series).day4"] {
            let folder = device.home.appendingPathComponent("Library").appendingPathComponent(id)
            #expect(FileManager.default.fileExists(atPath: folder.path), "\(id)'s files are there")
        }
        _ = await server.stop()
    }
}
