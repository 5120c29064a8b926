/// Why an archive was refused or could not be unpacked, naming the entry at fault.
public enum UnpackError: Error, Sendable, Equatable, CustomStringConvertible {
    case unsupportedFormat(String)
    case escapesDestination(entry: String)
    case linkEscapes(entry: String, target: String)
    /// The entry would be written through a link the archive itself made.
    case writesThroughLink(entry: String, link: String)
    /// The disk (or the user's quota) is full.
    case noSpace(entry: String?)
    /// Unpacking needs an empty folder (it is emptied again if the archive is refused).
    case destinationNotEmpty(path: String)
    case forbiddenType(entry: String, type: String)
    case tooManyEntries(limit: Int)
    case entryTooLarge(entry: String, limit: Int64)
    case totalTooLarge(limit: Int64)
    case corrupt(entry: String?, message: String)
    case disk(entry: String?, message: String)
    /// libarchive could not be loaded (``ArchiveVersion/unavailable(_:)`` says why): nothing
    /// is wrong with the archive or the disk, and the download is kept.
    case noLibrary(message: String)
    /// What was written and checked is not what the archive (or the catalog) says any more: a
    /// file changed on disk between its writing and the check (a hand edit, a failing disk).
    case changedOnDisk(entry: String, detail: String)

    public var description: String {
        switch self {
        case .unsupportedFormat(let detail):
            return "the archive is not a zip or tar (\(detail)); the download was discarded"
        case .escapesDestination(let entry):
            return "archive entry \"\(entry)\" escapes the destination; the download was discarded"
        case .linkEscapes(let entry, let target):
            return "archive entry \"\(entry)\" links to \"\(target)\", outside the destination; the download was discarded"
        case .writesThroughLink(let entry, let link):
            return "archive entry \"\(entry)\" would be written through the link \"\(link)\" the archive made; the download was discarded"
        case .destinationNotEmpty(let path):
            return "\(path) is not empty (or cannot be read); unpack into a new or empty folder"
        case .noSpace(let entry):
            return "the disk is full while unpacking\(entry.map { " \"\($0)\"" } ?? ""); free some space, then run kiosk resume"
        case .forbiddenType(let entry, let type):
            return "archive entry \"\(entry)\" is a \(type), which a book may not contain; the download was discarded"
        case .tooManyEntries(let limit):
            return "the archive holds more than \(limit) entries; the download was discarded"
        case .entryTooLarge(let entry, let limit):
            return "archive entry \"\(entry)\" unpacks to more than \(limit) bytes; the download was discarded"
        case .totalTooLarge(let limit):
            return "the archive unpacks to more than \(limit) bytes (a decompression bomb?); the download was discarded"
        case .corrupt(let entry, let message):
            return "the archive is damaged\(entry.map { " at entry \"\($0)\"" } ?? "") (\(message)); it will be downloaded again"
        case .disk(let entry, let message):
            return "cannot write \(entry.map { "\"\($0)\"" } ?? "the content") to disk (\(message)); run kiosk resume to try again"
        case .noLibrary(let message):
            return "cannot unpack: \(message); the download is kept, and kiosk resume unpacks it"
        case .changedOnDisk(let entry, let detail):
            return "\"\(entry)\" changed on disk before it could be installed (\(detail)); nothing was installed, and kiosk resume checks and fetches it again"
        }
    }

    /// True when the archive itself is hostile or broken beyond a new download.
    public var isHostile: Bool {
        switch self {
        case .corrupt, .disk, .noLibrary, .noSpace, .destinationNotEmpty, .changedOnDisk: return false
        default: return true
        }
    }
}
