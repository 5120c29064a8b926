import Foundation
internal import GRDB
import KioskCore

/// Where a product's content download stands.
///
/// `queued → downloading → verifying → unpacking → installed`; `waiting` after a transient failure
/// (with `nextAttemptAt`), `failed` for good (with the reason), `paused`, `cancelled`; and
/// `installed → removed` when the reader or the keep rule frees its files (``Newsstand``): the
/// purchase stands, and `kiosk resume ID` queues it again.
public enum DownloadState: String, Codable, Sendable, CaseIterable {
    case queued, downloading, verifying, unpacking, installed, waiting, failed, paused, cancelled, removed

    /// States in which a process holds the download's claim.
    static let claimed: [DownloadState] = [.downloading, .verifying, .unpacking]
}

/// One product's content download.
public struct DownloadRecord: Codable, Sendable, Equatable, StoredRow {
    static let databaseTableName = "download"
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
    /// The process working on it (`pid:nonce`) while it is downloading, verifying or unpacking.
    public var owner: String?
    /// The claim lapses after this unless its owner renews it: shown to people; the decision is
    /// taken on the monotonic clock (`leaseBoot`, `leaseDeadline`).
    public var leaseUntil: Date?
    /// The transaction whose receipt is presented.
    public var transactionId: String?
    /// Bumped at every claim: the fence every write of the claim's holder checks.
    public var claimGeneration: Int64 = 0
    /// The boot the lease's deadline counts from, and the deadline in `CLOCK_MONOTONIC` nanoseconds.
    var leaseBoot: String?
    var leaseDeadline: Int64?
    /// The `Authorization` scheme `receipt` is presented under (``PurchaseProofKind``): nil for
    /// Kiosk's own receipt, `AppStore` for a StoreKit 2 signed transaction.
    public var proofKind: String? = nil
    /// When the reader pinned it: a pinned product's files are never removed by a keep rule or for room.
    public var pinnedAt: Date? = nil

    /// The header that presents the proof: every request for this download's bytes or manifest.
    var authorization: (name: String, value: String) {
        ("Authorization", "\(proofKind ?? PurchaseProofKind.kioskReceipt.rawValue) \(receipt)")
    }
    /// What the last install cost when it was not the whole archive:
    /// "update 1.2 MB of 212 MB (3 files changed)".
    public var transferNote: String?
    /// A publication delivered as a file (EPUB, PDF, CBZ): its name in `Library/<id>/`, as the
    /// catalog said it (``ArchiveFormat/deliveredAsFile``); nil for an archive.
    public var fileName: String?

    enum Columns {
        static let productId = Column("productId")
        static let state = Column("state")
        static let nextAttemptAt = Column("nextAttemptAt")
        static let owner = Column("owner")
        static let leaseUntil = Column("leaseUntil")
        static let lastError = Column("lastError")
        static let attempts = Column("attempts")
        static let updatedAt = Column("updatedAt")
        static let transactionId = Column("transactionId")
        static let claimGeneration = Column("claimGeneration")
        static let leaseBoot = Column("leaseBoot")
        static let leaseDeadline = Column("leaseDeadline")
        static let transferNote = Column("transferNote")
    }

    var subject: String { "the download of \(productId)" }
}

/// An installed product in `Library/<product id>/`.
public struct LibraryItem: Codable, Sendable, Equatable, StoredRow {
    static let databaseTableName = "libraryItem"
    public var productId: String
    public var version: String
    public var sha256: String
    /// The product's folder. Stored relative to the home (`Library/ID`; Kiosk before issue 30
    /// stored it absolute); ``KioskClient/libraryEntries()`` hands it out resolved against the home.
    public var path: String
    public var installedAt: Date
    /// A digest of the installed files' names and sizes; a folder that no longer matches is reinstalled.
    public var treeDigest: String?

    /// The folder of `productId` relative to the home, as stored.
    static func relativePath(_ productId: String) -> String { "Library/\(productId)" }
}
