internal import GRDB

/// A value the client keeps as a row of a `kiosk.sqlite` table. Its public type names no GRDB
/// protocol (the engine's API exposes no GRDB types); the rows' code reads and writes it through
/// ``Stored``, GRDB's record for it.
protocol StoredRow: Codable, Sendable {
    static var databaseTableName: String { get }
    /// Called with the row ID once a new row is inserted (the purchases' `id`).
    mutating func didInsert(rowID: Int64)
}

extension StoredRow {
    mutating func didInsert(rowID: Int64) {}
}

/// GRDB's record of a ``StoredRow``: coded exactly as the value is, so the table's columns are
/// the value's coding keys, and GRDB's own handling of dates and optionals applies unchanged.
struct Stored<Value: StoredRow>: FetchableRecord, MutablePersistableRecord, Codable {
    var value: Value

    static var databaseTableName: String { Value.databaseTableName }

    init(_ value: Value) { self.value = value }

    init(from decoder: any Decoder) throws { value = try Value(from: decoder) }

    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }

    mutating func didInsert(_ inserted: InsertionSuccess) { value.didInsert(rowID: inserted.rowID) }
}

typealias PaymentRow = Stored<PaymentRecord>
typealias DownloadRow = Stored<DownloadRecord>
typealias LibraryItemRow = Stored<LibraryItem>
