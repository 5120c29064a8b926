import Foundation
import KioskCore
@testable import KioskServer
import KioskTestSupport
import Logging
import SQLKit
import Testing

/// The store's hand-spelled inserts write every field, on either engine.
@Suite("Store tables")
struct StoreTablesTests {
    @Test("a transaction and a ledger entry with every field set read back field for field", arguments: TestEngine.all)
    func everyFieldWritten(engine: TestEngine) async throws {
        let directory = try TemporaryDirectory()
        let location = try await engine.freshDatabase() ?? .sqlite(path: directory.path("store.sqlite").path)
        let database = try await ServerDatabase.open(location, logger: Logger(label: "test"))
        let account = AccountRecord(id: "acct_tables", tokenHash: "hash", credits: 0, createdAt: .storeNow, revision: 0)
        // Half seconds: exact in binary, so a date compares equal after any engine's round trip.
        let now = Date(timeIntervalSince1970: 1_790_000_000.5)
        let record = TransactionRecord(
            sequence: nil, id: "txn_tables", accountId: account.id, productId: "com.kiosk.books.tables", kind: .subscription,
            quantity: 3, originalTransactionId: "txn_original", purchaseDate: now.addingTimeInterval(1), expiresDate: now.addingTimeInterval(2),
            status: .revoked, paymentMethod: "approve", idempotencyKey: "key-tables", amountCents: 1234, currency: "EUR",
            creditsGranted: 5, creditsSpent: 6, signedTransaction: "signed.jws.value", message: "a message", finishedAt: now.addingTimeInterval(3),
            createdAt: now.addingTimeInterval(4), revokedAt: now.addingTimeInterval(5), revocationReason: "refunded")
        let entry = LedgerEntry(id: nil, transactionId: record.id, kind: .refund, accountId: account.id, amountCents: -1234,
                                currency: "EUR", reason: "asked for", createdAt: now.addingTimeInterval(6))
        let inserted = try await database.write { db in
            try await db.insert(into: "account").model(account).run()
            let inserted = try await db.insert(record)
            try await db.insert(entry)
            return inserted
        }
        let (read, ledger) = try await database.read { db in
            (try await db.storeTransaction(record.id), try await db.ledger { $0.where("transactionId", .equal, record.id) })
        }
        var expected = record
        expected.sequence = inserted.sequence
        #expect(inserted.sequence != nil)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let readText = String(decoding: try encoder.encode(read), as: UTF8.self)
        let expectedText = String(decoding: try encoder.encode(expected), as: UTF8.self)
        #expect(readText == expectedText)
        var expectedEntry = entry
        expectedEntry.id = ledger.first?.id
        #expect(ledger.count == 1)
        let ledgerText = String(decoding: try encoder.encode(ledger.first), as: UTF8.self)
        let expectedEntryText = String(decoding: try encoder.encode(expectedEntry), as: UTF8.self)
        #expect(ledgerText == expectedEntryText)
        await database.close()
    }
}
