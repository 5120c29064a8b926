import CArchive
import Foundation
import KioskCore

/// Whether a publisher's file is the publication its declared format says, before it is sold
/// (issue 47): an EPUB, a PDF or a CBZ is delivered as the file itself, so a reading app must be
/// able to open what the reader gets.
/// - EPUB (OCF 3.3): the first entry is `mimetype`, stored uncompressed, reading
///   `application/epub+zip`; there is a `META-INF/container.xml`; libarchive opens the whole
///   archive. What the container and the package document say is read with an XML parser by the
///   server (`EPUBPackage`), which alone links one.
/// - PDF: the `%PDF-` header and the `%%EOF` marker near the end.
/// - CBZ: a zip whose files are all images (and, at most, `ComicInfo.xml`), at least one.
public enum PublicationCheck {
    /// Why a file is not the publication it says it is, in a sentence.
    public struct Refusal: Error, Equatable, CustomStringConvertible, Sendable {
        public let reason: String

        public init(reason: String) {
            self.reason = reason
        }

        public var description: String { reason }
    }

    /// The images a comic may hold, by extension.
    static let imageExtensions: Set<String> = ["jpg", "jpeg", "png", "gif", "webp", "avif", "jxl"]
    /// The largest entry this check reads into memory (container.xml, the package document).
    public static let readLimit = 1 << 20
    /// The most bytes a publication's entries may inflate to, whatever its size: a zip bomb (a
    /// few kilobytes that inflate to gigabytes) is refused before a reading app meets it.
    static let inflatedFloor: Int64 = 256 << 20
    /// … or this many times the file's size, when that is more (stored images do not shrink,
    /// text rarely more than ten times).
    static let inflationRatio: Int64 = 32

    /// - Throws: ``Refusal`` naming what is wrong.
    public static func check(_ file: URL, as format: ArchiveFormat) throws {
        switch format {
        case .epub: _ = try checkEPUB(file)
        case .pdf: try checkPDF(file)
        case .cbz: try checkCBZ(file)
        case .zip, .tarGz: break
        }
    }

    // MARK: EPUB

    /// The OCF checks, in one pass over the whole archive; returns `META-INF/container.xml`.
    public static func checkEPUB(_ file: URL) throws -> Data {
        // OCF: the first local file header is `mimetype`, stored (method 0), with no extra field
        // before its content, so that the type is readable at a fixed offset.
        let head = try firstBytes(of: file, count: 38 + 20)
        let expected = Array("application/epub+zip".utf8)
        guard head.count >= 58, head[0] == 0x50, head[1] == 0x4B, head[2] == 0x03, head[3] == 0x04 else {
            throw Refusal(reason: "it is not a zip container (an EPUB is a zip whose first entry is mimetype)")
        }
        let method = UInt16(head[8]) | UInt16(head[9]) << 8
        let nameLength = Int(UInt16(head[26]) | UInt16(head[27]) << 8)
        let extraLength = Int(UInt16(head[28]) | UInt16(head[29]) << 8)
        guard nameLength == 8, Array(head[30..<38]) == Array("mimetype".utf8) else {
            throw Refusal(reason: "its first entry is not mimetype (OCF: an EPUB's first entry is mimetype)")
        }
        guard method == 0 else { throw Refusal(reason: "its mimetype entry is compressed (OCF: it must be stored)") }
        guard extraLength == 0 else { throw Refusal(reason: "its mimetype entry has an extra field in its header (OCF: it must have none)") }
        let content = try firstBytes(of: file, count: 38 + extraLength + expected.count).dropFirst(38 + extraLength)
        guard Array(content) == expected else { throw Refusal(reason: "its mimetype entry does not read application/epub+zip") }

        let entries = try zipEntries(file, reading: ["META-INF/container.xml"], checkingAll: true)
        guard let container = entries.read["META-INF/container.xml"] else {
            throw Refusal(reason: "it has no META-INF/container.xml (OCF: it names the package document)")
        }
        return container
    }

    // MARK: PDF

    static func checkPDF(_ file: URL) throws {
        let head = try firstBytes(of: file, count: 8)
        guard head.starts(with: Array("%PDF-".utf8)) else { throw Refusal(reason: "it does not begin with the %PDF- header") }
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size > 1024 ? size - 1024 : 0)
        let tail = try handle.readToEnd() ?? Data()
        guard tail.range(of: Data("%%EOF".utf8)) != nil else {
            throw Refusal(reason: "it has no %%EOF marker at its end (a truncated or damaged PDF)")
        }
    }

    // MARK: CBZ

    static func checkCBZ(_ file: URL) throws {
        let names = try zipEntries(file, reading: [], checkingAll: true).names
        var images = 0
        for name in names {
            let leaf = name.split(separator: "/").last.map(String.init) ?? name
            if leaf.lowercased() == "comicinfo.xml" { continue }
            guard let dot = leaf.lastIndex(of: "."), imageExtensions.contains(leaf[leaf.index(after: dot)...].lowercased()) else {
                throw Refusal(reason: "it holds \(ProductID.printable(name)), which is not an image (a CBZ is a zip of images)")
            }
            images += 1
        }
        guard images > 0 else { throw Refusal(reason: "it holds no image (a CBZ is a zip of images)") }
    }

    // MARK: Reading

    static func firstBytes(of file: URL, count: Int) throws -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: file.path) else { throw Refusal(reason: "it cannot be read") }
        defer { try? handle.close() }
        return Array((try? handle.read(upToCount: count)) ?? Data())
    }

    /// The names of the regular files in a zip, and the bytes of those in `reading` (up to
    /// ``readLimit`` each). Every entry is inflated and its CRC checked (libarchive reads the whole
    /// archive), so one that does not read whole is refused; so are an entry whose name would leave
    /// a reader's folder, a link or special file, a name given twice, and more inflated bytes than
    /// ``inflatedFloor`` or ``inflationRatio`` times the file allow.
    /// - Parameter checkingAll: inflate every entry (the check); otherwise only those in `reading`
    ///   are, and the rest skipped (reading metadata from a file already checked).
    public static func zipEntries(_ file: URL, reading wanted: Set<String>, limit: Int = readLimit, checkingAll: Bool = false) throws -> (names: [String], read: [String: Data]) {
        guard let handle = archive_read_new() else { throw Refusal(reason: ArchiveVersion.unavailable("a reader")) }
        defer { archive_read_free(handle) }
        archive_read_support_format_zip(handle)
        func message() -> String { archive_error_string(handle).map { String(cString: $0) } ?? "unknown libarchive error" }
        guard archive_read_open_filename(handle, file.path, 64 * 1024) == ARCHIVE_OK else {
            throw Refusal(reason: "libarchive does not open it as a zip (\(message()))")
        }
        let fileSize = Int64((try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0)
        let inflatedLimit = max(inflatedFloor, fileSize * inflationRatio)
        var inflated: Int64 = 0
        var names: [String] = []
        var seen = Set<String>()
        var read: [String: Data] = [:]
        var header: OpaquePointer?
        while true {
            let next = archive_read_next_header(handle, &header)
            if next == ARCHIVE_EOF { break }
            guard next >= ARCHIVE_WARN, let header else { throw Refusal(reason: "libarchive cannot read it whole (\(message()))") }
            let name = ArchiveExtractor.entryName(header)
            guard (try? ArchiveExtractor.checkedRelativePath(name)) != nil else {
                throw Refusal(reason: "it holds an entry named \(ProductID.printable(name)), which would land outside a reader's folder")
            }
            let kind = UInt32(archive_entry_filetype(header))
            if kind == kiosk_ae_ifdir { continue }
            guard kind == kiosk_ae_ifreg else {
                throw Refusal(reason: "it holds \(ProductID.printable(name)), a link or special file (a publication holds files only)")
            }
            guard seen.insert(name).inserted else { throw Refusal(reason: "it holds \(ProductID.printable(name)) twice") }
            names.append(name)
            if !checkingAll, !wanted.contains(name) {
                guard archive_read_data_skip(handle) >= ARCHIVE_WARN else {
                    throw Refusal(reason: "libarchive cannot read \(ProductID.printable(name)) (\(message()))")
                }
                continue
            }
            // Every entry is inflated to its end, so that libarchive checks its CRC: a damaged
            // entry (ARCHIVE_WARN, "ZIP bad CRC") is refused, not sold.
            var data = Data()
            var block: UnsafeRawPointer?
            var count = 0
            var offset: la_int64_t = 0
            while true {
                let status = archive_read_data_block(handle, &block, &count, &offset)
                if status == ARCHIVE_EOF { break }
                guard status == ARCHIVE_OK else {
                    throw Refusal(reason: "libarchive cannot read \(ProductID.printable(name)) whole (\(message()))")
                }
                inflated += Int64(count)
                guard inflated <= inflatedLimit else {
                    throw Refusal(reason: "its entries inflate to more than \(inflatedLimit >> 20) MiB (a zip bomb?)")
                }
                if wanted.contains(name), data.count <= limit, let block {
                    data.append(block.assumingMemoryBound(to: UInt8.self), count: min(count, limit + 1 - data.count))
                }
            }
            if wanted.contains(name) { read[name] = data }
        }
        return (names, read)
    }
}
