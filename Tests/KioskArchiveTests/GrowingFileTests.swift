import Foundation
import KioskArchive
import KioskCore
import KioskTestSupport
import Testing

@Suite("Unpacking a tar archive while it is written")
struct GrowingFileTests {
    static let entries: [HostileArchive.Entry] = (0..<40).map { .file("part-\($0 / 10)/page-\($0).md", String(repeating: "line \($0) of a book\n", count: 400)) }

    /// Copies `archive` into `growing` a small piece at a time, as a transfer would, stopping after `limit` bytes.
    static func copySlowly(_ archive: Data, to growing: URL, limit: Int? = nil) async throws {
        let handle = try FileHandle(forWritingTo: growing)
        defer { try? handle.close() }
        var offset = 0
        let end = min(limit ?? archive.count, archive.count)
        while offset < end {
            let next = min(offset + 512, end)
            try handle.write(contentsOf: archive[offset..<next])
            offset = next
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    static func setUp() throws -> (TemporaryDirectory, Data, URL, URL) {
        let root = try TemporaryDirectory()
        let archive = root.path("whole.tar.gz")
        try HostileArchive.write(entries, to: archive)
        let growing = root.path("growing.partial")
        FileManager.default.createFile(atPath: growing.path, contents: nil)
        let staging = root.path("staging")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        return (root, try Data(contentsOf: archive), growing, staging)
    }

    @Test("the extraction keeps pace with the writer and gives the whole tree once the file is finished")
    func followsTheWriter() async throws {
        let (root, archive, growing, staging) = try Self.setUp()
        let file = GrowingFile(growing, expectedSize: Int64(archive.count))
        // A thread of its own: the extraction blocks while it waits for bytes.
        let extraction = Task { try await offCooperativePool { try ArchiveExtractor().extract(file, into: staging) } }
        file.beginReading()
        try await Self.copySlowly(archive, to: growing)
        file.finish()
        let summary = try await extraction.value
        #expect(summary.entries == Self.entries.count)
        // Every byte the extraction read, hashed as it read them, the tar's end padding included.
        #expect(summary.archiveSHA256 == FileDigest.sha256(of: archive))

        let sequential = root.path("sequential")
        try FileManager.default.createDirectory(at: sequential, withIntermediateDirectories: true)
        _ = try ArchiveExtractor().extract(root.path("whole.tar.gz"), into: sequential)
        #expect(try FolderSnapshot.files(in: staging) == FolderSnapshot.files(in: sequential))
    }

    @Test("nothing is read before the writer says the bytes are final, and an abandoned download fails the extraction and leaves the staging empty")
    func abandoned() async throws {
        let (directory, archive, growing, staging) = try Self.setUp()
        defer { withExtendedLifetime(directory) {} }
        // Bytes of an earlier attempt are in the file, but reading has not been allowed.
        try archive.prefix(archive.count / 2).write(to: growing)
        let file = GrowingFile(growing, expectedSize: Int64(archive.count))
        // A thread of its own: the extraction blocks while it waits for bytes.
        let extraction = Task { try await offCooperativePool { try ArchiveExtractor().extract(file, into: staging) } }
        try await Task.sleep(for: .milliseconds(200))
        #expect(try FileManager.default.contentsOfDirectory(atPath: staging.path).isEmpty, "read before beginReading")
        file.beginReading()
        try await Task.sleep(for: .milliseconds(200))
        #expect(try !FileManager.default.contentsOfDirectory(atPath: staging.path).isEmpty, "the first half was not unpacked")
        file.abandon()
        await #expect(throws: UnpackError.self) { try await extraction.value }
        #expect(try FileManager.default.contentsOfDirectory(atPath: staging.path).isEmpty)
    }

    @Test("a file that ends short of its announced size fails instead of installing part of it")
    func finishedShort() async throws {
        let (directory, archive, growing, staging) = try Self.setUp()
        defer { withExtendedLifetime(directory) {} }
        let file = GrowingFile(growing, expectedSize: Int64(archive.count))
        // A thread of its own: the extraction blocks while it waits for bytes.
        let extraction = Task { try await offCooperativePool { try ArchiveExtractor().extract(file, into: staging) } }
        file.beginReading()
        try await Self.copySlowly(archive, to: growing, limit: archive.count - 100)
        file.finish()
        await #expect(throws: UnpackError.self) { try await extraction.value }
        #expect(try FileManager.default.contentsOfDirectory(atPath: staging.path).isEmpty)
    }

    @Test("a hostile entry arriving late is refused like in a whole file, and the staging is emptied")
    func hostileWhileGrowing() async throws {
        let root = try TemporaryDirectory()
        let archivePath = root.path("hostile.tar.gz")
        try HostileArchive.write(Self.entries + [.file("../outside/evil.txt", "pwned")], to: archivePath)
        let archive = try Data(contentsOf: archivePath)
        let growing = root.path("growing.partial")
        FileManager.default.createFile(atPath: growing.path, contents: nil)
        let staging = root.path("staging")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        let file = GrowingFile(growing, expectedSize: Int64(archive.count))
        // A thread of its own: the extraction blocks while it waits for bytes.
        let extraction = Task { try await offCooperativePool { try ArchiveExtractor().extract(file, into: staging) } }
        file.beginReading()
        try await Self.copySlowly(archive, to: growing)
        file.finish()
        await #expect(throws: UnpackError.escapesDestination(entry: "../outside/evil.txt")) { try await extraction.value }
        #expect(try FileManager.default.contentsOfDirectory(atPath: staging.path).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: root.path("outside").path))
    }

    @Test("installed means checked: a file put under the partial's name is what the extraction reads and hashes, so its digest is not the checked one; a whole archive read by name is hashed through the descriptor it is unpacked from")
    func digestOfWhatWasRead() async throws {
        let (root, archive, growing, staging) = try Self.setUp()
        // The transfer wrote (and hashed) the real archive elsewhere; another file has the name.
        let other = try Data(contentsOf: root.path("whole.tar.gz"))
        var tampered = other
        tampered[tampered.count - 1] ^= 0x01
        try tampered.write(to: growing)
        let file = GrowingFile(growing, expectedSize: Int64(archive.count))
        file.beginReading()
        file.finish()
        let summary = try? ArchiveExtractor().extract(file, into: staging)
        #expect(summary?.archiveSHA256 != FileDigest.sha256(of: archive))

        let sequential = root.path("sequential")
        try FileManager.default.createDirectory(at: sequential, withIntermediateDirectories: true)
        let whole = try ArchiveExtractor().extract(root.path("whole.tar.gz"), into: sequential)
        #expect(whole.archiveSHA256 == FileDigest.sha256(of: archive))
    }
}
