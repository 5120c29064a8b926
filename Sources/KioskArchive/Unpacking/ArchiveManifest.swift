import Crypto
import Foundation

/// Every entry an archive holds: its path, kind, size and SHA-256, read from the archive's own
/// bytes while it is unpacked.
///
/// When those bytes are the ones whose SHA-256 the catalog publishes, the manifest is the
/// published content, entry by entry; ``check(_:)`` then proves a folder holds exactly that (no
/// entry missing, added, truncated or changed) before the folder is named installed.
public struct ArchiveManifest: Sendable, Equatable, Codable {
    public enum Kind: String, Sendable, Codable {
        case file, directory, symlink
    }

    public struct Entry: Sendable, Equatable, Codable {
        /// Relative to the archive's root, `/`-separated, without `.` components.
        public var path: String
        public var kind: Kind
        /// Bytes of a file; 0 for the other kinds.
        public var size: Int64
        /// Lowercase hex SHA-256 of a file's bytes.
        public var sha256: String?
        /// Where a symlink points.
        public var target: String?
    }

    public private(set) var entries: [Entry] = []
    private var index: [String: Int] = [:]

    public init() {}

    /// The manifest of a publication delivered as one file (issue 47): that file alone.
    public static func singleFile(_ path: String, size: Int64, sha256: String) -> ArchiveManifest {
        var manifest = ArchiveManifest()
        manifest.add(Entry(path: path, kind: .file, size: size, sha256: sha256, target: nil))
        return manifest
    }

    mutating func add(_ entry: Entry) {
        index[entry.path] = entries.count
        entries.append(entry)
    }

    func entry(_ path: String) -> Entry? {
        index[path].map { entries[$0] }
    }

    private enum CodingKeys: String, CodingKey { case entries }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        for entry in try container.decode([Entry].self, forKey: .entries) { add(entry) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(entries, forKey: .entries)
    }

    /// Why a folder is not what the manifest says, naming the first entry at fault.
    public struct Mismatch: Error, Sendable, CustomStringConvertible {
        public var path: String
        public var problem: String
        public var description: String { "\"\(path)\" \(problem)" }
    }

    /// Checks that `folder` holds exactly the manifest's entries: the same paths and kinds (a
    /// folder the archive only implies, as the parent of an entry, is allowed), each file's size,
    /// then each file's SHA-256, read back from disk; symlinks point where the archive said.
    /// `unchangedSinceChecked` names files already proven to hold their bytes (by an earlier
    /// check, and a status change time older than it): their kind and size are checked, not
    /// their bytes read again.
    /// - Throws: ``Mismatch`` naming the first entry that differs.
    public func check(_ folder: URL, unchangedSinceChecked: Set<String> = []) throws {
        var implied = Set<String>()
        for entry in entries {
            var parts = entry.path.split(separator: "/").dropLast()
            while !parts.isEmpty {
                implied.insert(parts.joined(separator: "/"))
                parts = parts.dropLast()
            }
        }
        let base = folder.path.hasSuffix("/") ? folder.path : folder.path + "/"
        var seen = 0
        var files: [(path: String, entry: Entry)] = []
        for relative in try Self.walk(folder) {
            var info = stat()
            guard lstat(base + relative, &info) == 0 else { throw Mismatch(path: relative, problem: "vanished while the folder was checked") }
            let kind = info.st_mode & S_IFMT
            guard let entry = entry(relative) else {
                guard kind == S_IFDIR, implied.contains(relative) else { throw Mismatch(path: relative, problem: "is not in the archive") }
                continue
            }
            seen += 1
            switch entry.kind {
            case .directory:
                guard kind == S_IFDIR else { throw Mismatch(path: relative, problem: "should be a folder") }
            case .symlink:
                guard kind == S_IFLNK, (try? FileManager.default.destinationOfSymbolicLink(atPath: base + relative)) == entry.target else {
                    throw Mismatch(path: relative, problem: "should be a link to \(entry.target ?? "")")
                }
            case .file:
                guard kind == S_IFREG else { throw Mismatch(path: relative, problem: "should be a file") }
                guard Int64(info.st_size) == entry.size else {
                    throw Mismatch(path: relative, problem: "has \(info.st_size) bytes, the archive \(entry.size)")
                }
                files.append((relative, entry))
            }
        }
        guard seen == entries.count else {
            let present = Set(try Self.walk(folder))
            let missing = entries.first { !present.contains($0.path) }?.path ?? "?"
            throw Mismatch(path: missing, problem: "is missing")
        }
        // Sizes first, for every file, so a missing or truncated file is found without reading any.
        for (relative, entry) in files where !unchangedSinceChecked.contains(relative) {
            guard try Self.sha256(ofFile: base + relative) == entry.sha256 else {
                throw Mismatch(path: relative, problem: "does not have the archive's bytes")
            }
        }
    }

    /// Every path under `folder`, relative, without following links.
    private static func walk(_ folder: URL) throws -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder.path) else {
            throw Mismatch(path: folder.path, problem: "cannot be read")
        }
        var paths: [String] = []
        while let relative = walker.nextObject() as? String { paths.append(relative) }
        return paths
    }

    static func sha256(ofFile path: String) throws -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw Mismatch(path: path, problem: "cannot be read: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var hash = SHA256()
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
        defer { buffer.deallocate() }
        while true {
            let count = read(descriptor, buffer.baseAddress, size)
            if count == 0 { break }
            guard count > 0 else { throw Mismatch(path: path, problem: "cannot be read: \(String(cString: strerror(errno)))") }
            hash.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
        return hash.finalize().map { String(format: "%02x", $0) }.joined()
    }
}

/// The SHA-256 of one entry's data as libarchive hands it over in blocks, holes included.
struct EntryDigest {
    private var hash = SHA256()
    private var position: Int64 = 0

    mutating func add(_ block: UnsafeRawPointer?, count: Int, at offset: Int64) {
        if offset > position {
            // A sparse entry's hole reads back as zeros.
            let zeros = [UInt8](repeating: 0, count: 64 << 10)
            var gap = offset - position
            while gap > 0 {
                let step = Int(min(gap, Int64(zeros.count)))
                zeros.withUnsafeBytes { hash.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[0..<step])) }
                gap -= Int64(step)
            }
            position = offset
        }
        if let block, count > 0 {
            hash.update(bufferPointer: UnsafeRawBufferPointer(start: block, count: count))
            position += Int64(count)
        }
    }

    /// Finishes it for an entry of `size` bytes (a trailing hole included).
    mutating func finalize(size: Int64) -> String {
        add(nil, count: 0, at: size)
        return hash.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
