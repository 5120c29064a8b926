/// How much an archive may unpack to; a breach aborts and removes the staging folder.
public struct ExtractionLimits: Sendable, Equatable {
    public var maxEntries: Int
    public var maxEntryBytes: Int64
    /// The unpacked total may not exceed max(`minimumTotalBytes`, `maxRatio` × the archive's size).
    public var minimumTotalBytes: Int64
    public var maxRatio: Int64

    public init(maxEntries: Int = 100_000, maxEntryBytes: Int64 = 1 << 30, minimumTotalBytes: Int64 = 1 << 30, maxRatio: Int64 = 50) {
        self.maxEntries = maxEntries
        self.maxEntryBytes = maxEntryBytes
        self.minimumTotalBytes = minimumTotalBytes
        self.maxRatio = maxRatio
    }

    /// The largest unpacked total allowed for an archive of `archiveSize` bytes.
    public func maxTotalBytes(archiveSize: Int64) -> Int64 {
        max(minimumTotalBytes, maxRatio.multipliedReportingOverflow(by: archiveSize).overflow ? .max : maxRatio * archiveSize)
    }
}
