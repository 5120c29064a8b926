import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// A reader's device in the operator's drills (restore, replication): its home folder, its
/// purchases through `kiosk buy`, and what it saved of them, read from its own database.
struct ReaderDevice: Sendable {
    let home: URL
    var environment: [String: String] { ["KIOSK_HOME": home.path] }

    func buy(_ product: String, server: String) async throws {
        let bought = try await KioskCommand.run(["buy", product, "--server", server], environment: environment)
        #expect(bought.status == 0, "\(product): \(bought.stderr)")
    }

    /// The account the device buys for.
    func accountId() throws -> String {
        try rows("SELECT accountId FROM payment WHERE accountId IS NOT NULL LIMIT 1").first ?? ""
    }

    /// Product and receipt of every purchase the device saved a receipt for.
    func receipts() throws -> [(product: String, receipt: String)] {
        try rows("SELECT productId || char(9) || receipt FROM payment WHERE receipt IS NOT NULL").compactMap { line in
            let fields = line.split(separator: "\t", maxSplits: 1).map(String.init)
            return fields.count == 2 ? (fields[0], fields[1]) : nil
        }
    }

    func receipt(for product: String) throws -> String? {
        try receipts().first { $0.product == product }?.receipt
    }

    /// The store's transaction of the device's purchase of `product`.
    func transaction(for product: String) throws -> String? {
        guard ProductID.isValid(product) else { return nil }
        return try rows("SELECT transactionId FROM payment WHERE transactionId IS NOT NULL AND productId = '\(product)' LIMIT 1").first
    }

    /// The store's transaction ids the device was given.
    func transactions() throws -> Set<String> {
        Set(try rows("SELECT transactionId FROM payment WHERE transactionId IS NOT NULL"))
    }

    private func rows(_ sql: String) throws -> [String] {
        let database = home.appendingPathComponent("kiosk.sqlite").path
        let result = try ToolProcess.run("/usr/bin/sqlite3", [database, sql])
        guard result.status == 0 else { throw TestServiceError("sqlite3 \(database) \(sql): \(result.output)") }
        return result.output.split(separator: "\n").map(String.init)
    }
}
