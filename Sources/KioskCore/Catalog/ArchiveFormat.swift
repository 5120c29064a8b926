/// The archive format a product's content is delivered in.
public enum ArchiveFormat: String, Codable, Sendable, CaseIterable {
    case zip
    case tarGz = "tar.gz"
    /// An EPUB is a zip container; only ready-made files use it.
    case epub

    /// The file-name extension, without the leading dot.
    public var fileExtension: String { rawValue }

    /// True when the archive can be unpacked front to back as its bytes arrive: a tar stream.
    /// A zip's directory is at its end, so it is unpacked once it is all there.
    public var unpacksAsItArrives: Bool { self == .tarGz }
}
