import Foundation
@testable import KioskStore
import Testing

/// New transaction and notification IDs sort in the order they were made (they go to the end of
/// their unique indexes), keep their formats, and differ when made in the same millisecond.
@Suite("Time-ordered IDs")
struct TimeOrderedIDTests {
    @Test("transaction IDs are txn_ and 20 hex digits, later ones sort after earlier ones, and 10,000 made at one instant differ")
    func transactionIDs() {
        let now = Date(timeIntervalSince1970: 1_795_000_000.123)
        let id = Store.newTransactionID(now: now)
        #expect(id.range(of: "^txn_[0-9a-f]{20}$", options: .regularExpression) != nil, "\(id)")
        #expect(id.dropFirst(4).prefix(11) == String(1_795_000_000_123, radix: 16).leftPadded(to: 11))
        #expect(Store.newTransactionID(now: now.addingTimeInterval(0.001)) > id)
        #expect(Store.newTransactionID(now: now.addingTimeInterval(86_400 * 365 * 100)) > id)
        #expect(Set((0..<10_000).map { _ in Store.newTransactionID(now: now) }).count == 10_000)
    }

    @Test("notification IDs are version 7 UUIDs that Foundation reads, in time order")
    func notificationIDs() throws {
        let now = Date(timeIntervalSince1970: 1_795_000_000.5)
        let id = Store.newNotificationID(now: now)
        let uuid = try #require(UUID(uuidString: id))
        #expect(uuid.uuidString.lowercased() == id)
        #expect(Array(id)[14] == "7")
        #expect("89ab".contains(Array(id)[19]))
        #expect(Store.newNotificationID(now: now.addingTimeInterval(0.002)) > id)
        #expect(Set((0..<10_000).map { _ in Store.newNotificationID(now: now) }).count == 10_000)
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
