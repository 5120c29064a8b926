import Foundation
import GRDB
import KioskCore

/// Where a product's content download stands.
///
/// `queued → downloading → verifying → unpacking → installed`; `waiting` after a transient failure
/// (with `nextAttemptAt`), `failed` for good (with the reason), `paused`, `cancelled`.
public enum DownloadState: String, Codable, Sendable, CaseIterable {
    case queued, downloading, verifying, unpacking, installed, waiting, failed, paused, cancelled

    /// States a killed process may have left behind mid-way; they are simply run again.
    static let interrupted: [DownloadState] = [.downloading, .verifying, .unpacking]
}

/// One product's content download.
public struct DownloadRecord: Codable, FetchableRecord, PersistableRecord, Sendable, Equatable {
    public static let databaseTableName = "download"
    public var productId: String
    public var state: DownloadState
    /// What the catalog says the bytes must be.
    public var sha256: String
    public var size: Int64
    public var version: String
    public var format: ArchiveFormat
    /// The receipt presented as proof: the purchase's, or the subscription's for an issue it covers.
    public var receipt: String
    /// Bytes in the partial file at the last progress commit.
    public var bytesDone: Int64
    /// The ETag the partial bytes came from, sent as If-Range on resume.
    public var partialETag: String?
    public var attempts: Int
    public var nextAttemptAt: Date?
    public var lastError: String?
    /// Checksum mismatches so far: one means download again from zero, two means fail.
    public var mismatches: Int
    public var createdAt: Date
    public var updatedAt: Date

    public enum Columns {
        static let productId = Column("productId")
        static let state = Column("state")
        static let nextAttemptAt = Column("nextAttemptAt")
    }
}

/// An installed product in `Library/<product id>/`.
public struct LibraryItem: Codable, FetchableRecord, PersistableRecord, Sendable, Equatable {
    public static let databaseTableName = "libraryItem"
    public var productId: String
    public var version: String
    public var sha256: String
    public var path: String
    public var installedAt: Date
}
