/// The format a product's content is delivered in: an archive the client unpacks into the
/// library (zip, tar.gz), or a publication delivered as the file itself (EPUB, PDF, CBZ), which
/// the library holds byte for byte as the publisher made it.
public enum ArchiveFormat: String, Codable, Sendable, CaseIterable {
    case zip
    case tarGz = "tar.gz"
    /// An EPUB 3 publication (a zip container), served from the publisher's ready-made file.
    case epub
    /// A PDF document.
    case pdf
    /// A comic book: a zip of images.
    case cbz

    /// The file-name extension, without the leading dot.
    public var fileExtension: String { rawValue }

    /// True for a publication delivered as the file itself (issue 47): it is never unpacked, and
    /// the library holds `Library/<id>/<its file name>`.
    public var deliveredAsFile: Bool { self == .epub || self == .pdf || self == .cbz }

    /// True when the archive can be unpacked front to back as its bytes arrive: a tar stream.
    /// A zip's directory is at its end, so it is unpacked once it is all there.
    public var unpacksAsItArrives: Bool { self == .tarGz }
}

/// A publication's file name as the library holds it: one path component a reading app opens.
public enum PublicationFileName {
    /// One name, 1 to 200 bytes of UTF-8, no `/`, no control characters (C0, DEL or C1: a
    /// terminal acts on them), not hidden, not `.` or `..`.
    public static func isSafe(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 200 && !name.hasPrefix(".") && !name.contains("/") && !name.contains("\\")
            && !name.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }
}
