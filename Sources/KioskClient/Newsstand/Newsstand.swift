import Foundation
internal import GRDB
import KioskCore

/// One title on the device's newsstand: its issues, what its rule keeps, and what goes next.
public struct TitleShelf: Sendable, Equatable {
    public struct Issue: Sendable, Equatable {
        public var productId: String
        public var title: String?
        public var publicationDate: String
        public var state: DownloadState
        /// The content's size as the catalog gives it (its archive's bytes).
        public var size: Int64
        public var pinned: Bool
        /// Bought on its own, not brought by the subscription: never removed by a rule.
        public var boughtAlone: Bool
        /// The rule removes it at the next tidy.
        public var goesNext: Bool
    }

    public var series: String
    public var frequency: Frequency
    public var rule: KeepRule
    /// True when the reader set the rule; false for the frequency's default.
    public var ruleIsSet: Bool
    /// Newest first.
    public var issues: [Issue]
}

/// The device's newsstand: the keep rule of each title (the `keepRule` rows, which nothing else
/// writes) and the tidy that applies them, asking ``Library`` to free the files of the issues a
/// rule lets go. It never removes a purchase: a removed issue stays owned, and `kiosk resume ID`
/// (or a pin) downloads it again.
struct Newsstand {
    let database: ClientDatabase
    let library: Library
    let purchases: Purchases

    // MARK: Rules

    /// The rules the reader set, by series.
    func rules() throws -> [String: KeepRule] {
        try database.read { db in
            var rules: [String: KeepRule] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT series, lastIssues, days FROM keepRule") {
                let series: String = row["series"]
                if let count: Int = row["lastIssues"] { rules[series] = .lastIssues(count) } else if let days: Int = row["days"] { rules[series] = .days(days) }
            }
            return rules
        }
    }

    /// Sets a title's rule; nil goes back to its frequency's default.
    func setRule(_ rule: KeepRule?, for series: String) throws {
        if case .lastIssues(let count)? = rule, count < 1 { throw ClientError.invalidRequest("keep at least 1 issue (the newest is always kept)") }
        if case .days(let days)? = rule, days < 1 { throw ClientError.invalidRequest("keep at least 1 day of issues") }
        if rule != nil {
            var known = false
            try database.forEachCachedProduct { product in if product.series == series { known = true } }
            guard known else { throw ClientError.invalidRequest("no title \(series) in the catalog this device synced: kiosk library lists the titles it holds, kiosk products every one") }
        }
        try database.write { db in
            guard let rule else {
                try db.execute(sql: "DELETE FROM keepRule WHERE series = ?", arguments: [series])
                return
            }
            let (count, days): (Int?, Int?) = switch rule {
            case .lastIssues(let count): (count, nil)
            case .days(let days): (nil, days)
            }
            try db.execute(sql: """
                INSERT INTO keepRule (series, lastIssues, days, updatedAt) VALUES (?, ?, ?, ?)
                ON CONFLICT (series) DO UPDATE SET lastIssues = excluded.lastIssues, days = excluded.days, updatedAt = excluded.updatedAt
                """, arguments: [series, count, days, Date()])
        }
    }

    // MARK: Shelves

    /// Every title with an issue on the device (any download of an issue), newest issue first.
    func shelves(now: Date = Date()) throws -> [TitleShelf] {
        let downloads = Dictionary(try library.downloads().map { ($0.productId, $0) }) { first, _ in first }
        guard !downloads.isEmpty else { return [] }
        var issuesOf: [String: [Product]] = [:]
        var datesOf: [String: [String]] = [:]
        try database.forEachCachedProduct { product in
            guard let series = product.series, product.kind == .nonConsumable, let date = product.publicationDate else { return }
            datesOf[series, default: []].append(date)
            if downloads[product.id] != nil { issuesOf[series, default: []].append(product) }
        }
        guard !issuesOf.isEmpty else { return [] }
        let boughtAlone = Set(try purchases.all().filter { PaymentState.owning.contains($0.state) && $0.kind == .nonConsumable }.map(\.productId))
        let rules = try rules()
        let today = IssueDate.today(now)
        return issuesOf.keys.sorted().map { series in
            let frequency = Frequency.of(publicationDates: datesOf[series] ?? []) ?? .monthly
            let rule = rules[series] ?? KeepRule.standard(for: frequency)
            let products = (issuesOf[series] ?? []).sorted { ($0.publicationDate ?? "", $0.id) > ($1.publicationDate ?? "", $1.id) }
            let ruled = products.compactMap { product -> ShelfRule.Issue? in
                guard let download = downloads[product.id], let date = product.publicationDate else { return nil }
                return ShelfRule.Issue(productId: product.id, publicationDate: date, installed: download.state == .installed,
                                       pinned: download.pinnedAt != nil, boughtAlone: boughtAlone.contains(product.id))
            }
            let going = Set(ShelfRule(rule: rule).removable(ruled, today: today))
            let issues = products.compactMap { product -> TitleShelf.Issue? in
                guard let download = downloads[product.id], let date = product.publicationDate else { return nil }
                return TitleShelf.Issue(productId: product.id, title: product.title, publicationDate: date, state: download.state,
                                        size: download.size, pinned: download.pinnedAt != nil, boughtAlone: boughtAlone.contains(product.id),
                                        goesNext: going.contains(product.id))
            }
            return TitleShelf(series: series, frequency: frequency, rule: rule, ruleIsSet: rules[series] != nil, issues: issues)
        }
    }

    // MARK: Tidying

    /// Frees the files of every issue the rules let go, oldest first; returns their IDs. Each
    /// removal is decided again under the write lock (``DownloadRows/removeInstalled(_:automatic:)``):
    /// an issue pinned, updated or removed meanwhile by another process is left as it is. Two
    /// processes tidying one home agree: the rule is a function of the rows, and an issue removed
    /// by one is no longer installed for the other.
    func tidy(now: Date = Date()) throws -> [String] {
        var removed: [String] = []
        for shelf in try shelves(now: now) {
            for issue in shelf.issues.reversed() where issue.goesNext {
                if try library.remove(issue.productId, automatic: true) { removed.append(issue.productId) }
            }
        }
        return removed
    }

    /// Makes room for `needed` bytes above the storage `floor` by freeing issues, oldest first,
    /// of every title: what a rule could remove (never a pin, an issue bought alone, or a title's
    /// newest issue), even among those it keeps. Stops as soon as there is room; returns the IDs freed.
    func makeRoom(for needed: Int64, keepingFree floor: Int64, now: Date = Date()) throws -> [String] {
        guard var available = library.freeSpace(), available - needed < floor else { return [] }
        let candidates = try shelves(now: now).flatMap { shelf -> [TitleShelf.Issue] in
            let installed = shelf.issues.filter { $0.state == .installed }
            return installed.dropFirst().filter { !$0.pinned && !$0.boughtAlone }
        }.sorted { ($0.publicationDate, $0.productId) < ($1.publicationDate, $1.productId) }
        // Nothing goes when all of them together would not make the room: the download waits anyway.
        let freeable = candidates.reduce(Int64(0)) { $0 + library.sizeOnDisk($1.productId) }
        guard available + freeable - needed >= floor else { return [] }
        var removed: [String] = []
        for issue in candidates where available - needed < floor {
            if try library.remove(issue.productId, automatic: true) { removed.append(issue.productId) }
            available = library.freeSpace() ?? available
        }
        return removed
    }
}
