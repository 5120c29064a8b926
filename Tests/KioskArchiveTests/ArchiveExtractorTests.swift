import Foundation
@testable import KioskArchive
import KioskCore
import KioskTestSupport
import Testing

@Suite("Safe unpacking")
struct ArchiveExtractorTests {
    /// Extracts into `root/staging` and returns the error; `root/outside` must stay empty.
    static func refusal(_ entries: [HostileArchive.Entry], format: HostileArchive.Format = .tarGz, limits: ExtractionLimits = ExtractionLimits()) throws -> (UnpackError?, TemporaryDirectory) {
        let root = try TemporaryDirectory()
        let archive = root.path("hostile.archive")
        try HostileArchive.write(entries, format: format, to: archive)
        try FileManager.default.createDirectory(at: root.path("outside"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: root.path("staging"), withIntermediateDirectories: true)
        do {
            _ = try ArchiveExtractor(limits: limits).extract(archive, into: root.path("staging"))
            return (nil, root)
        } catch let error as UnpackError {
            return (error, root)
        }
    }

    static func expectNothingOutside(_ root: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let outside = try FileManager.default.contentsOfDirectory(atPath: root.path("outside").path)
        #expect(outside.isEmpty, "something was written outside the staging folder: \(outside)", sourceLocation: sourceLocation)
        let top = Set(try FileManager.default.contentsOfDirectory(atPath: root.url.path))
        #expect(top == ["hostile.archive", "outside", "staging"], sourceLocation: sourceLocation)
    }

    static func expectStagingEmpty(_ root: TemporaryDirectory, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let left = try FileManager.default.contentsOfDirectory(atPath: root.path("staging").path)
        #expect(left.isEmpty, "a refused archive left \(left) in the destination", sourceLocation: sourceLocation)
    }

    @Test("a ../ path is refused, naming the entry", arguments: [HostileArchive.Format.tarGz, .zip])
    func dotDot(format: HostileArchive.Format) throws {
        let (error, root) = try Self.refusal([.file("chapter.md", "ok"), .file("../outside/evil.txt", "pwned")], format: format)
        #expect(error == .escapesDestination(entry: "../outside/evil.txt"))
        #expect(error?.description == "archive entry \"../outside/evil.txt\" escapes the destination; the download was discarded")
        try Self.expectNothingOutside(root)
    }

    @Test("an absolute path is refused")
    func absolutePath() throws {
        let root = try TemporaryDirectory()
        let target = root.path("outside/abs.txt").path
        let (error, _) = try Self.refusal([.file(target, "pwned")])
        #expect(error == .escapesDestination(entry: target))
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test("a symlink pointing out is refused, and so is a write through it")
    func symlinkOut() throws {
        let (error, root) = try Self.refusal([.symlink("link", target: "../outside"), .file("link/evil.txt", "pwned")])
        #expect(error == .linkEscapes(entry: "link", target: "../outside"))
        try Self.expectNothingOutside(root)

        let (absolute, _) = try Self.refusal([.symlink("passwd", target: "/etc/passwd")])
        #expect(absolute == .linkEscapes(entry: "passwd", target: "/etc/passwd"))
    }

    @Test("a file written through a link the archive made is refused by name, even a link that points inside")
    func writeThroughSymlink() throws {
        let (error, root) = try Self.refusal([.directory("dir"), .symlink("alias", target: "dir"), .file("alias/file.txt", "through")])
        #expect(error == .writesThroughLink(entry: "alias/file.txt", link: "alias"))
        #expect(error?.isHostile == true)
        #expect(error?.description == "archive entry \"alias/file.txt\" would be written through the link \"alias\" the archive made; the download was discarded")
        try Self.expectNothingOutside(root)
        try Self.expectStagingEmpty(root)
    }

    @Test("a chain of links that reads as inside but resolves outside is refused, and nothing is left behind")
    func linkChain() throws {
        let (error, root) = try Self.refusal([
            .directory("x"), .directory("x/y"), .file("x/y/page.md", "ok"),
            .symlink("x/y/up", target: ".."), .symlink("t", target: "x/y/up/../.."),
        ])
        #expect(error == .linkEscapes(entry: "t", target: "x/y/up/../.."))
        try Self.expectNothingOutside(root)
        try Self.expectStagingEmpty(root)

        let (loop, _) = try Self.refusal([.symlink("a", target: "b"), .symlink("b", target: "a/../.."), .symlink("c", target: "a/x")])
        #expect(loop != nil && loop?.isHostile == true)
    }

    @Test("snyk-style zip-slip entries are refused by name in zip and tar, with / and \\", arguments: [HostileArchive.Format.tarGz, .zip])
    func zipSlip(format: HostileArchive.Format) throws {
        for name in ["../../evil.txt", "good/../../evil.txt", "..\\..\\evil.txt", "good\\..\\..\\evil.txt"] {
            let (error, root) = try Self.refusal([.file("good/chapter.md", "ok"), .file(name, "pwned")], format: format)
            // libarchive's zip reader reads `\` as the folder separator Windows tools write it as.
            let reported = format == .zip ? name.replacingOccurrences(of: "\\", with: "/") : name
            #expect(error == .escapesDestination(entry: reported), "\(name)")
            try Self.expectNothingOutside(root)
            try Self.expectStagingEmpty(root)
        }
    }

    @Test("a hardlink through a link the archive made is refused by name")
    func hardlinkThroughLink() throws {
        let (error, root) = try Self.refusal([.directory("dir"), .file("dir/a.txt", "a"), .symlink("alias", target: "dir"), .hardlink("copy", target: "alias/a.txt")])
        #expect(error == .writesThroughLink(entry: "copy", link: "alias"))
        try Self.expectStagingEmpty(root)
    }

    @Test("a hardlink out is refused")
    func hardlinkOut() throws {
        let (error, root) = try Self.refusal([.file("page.md", "ok"), .hardlink("copy", target: "../outside/secret")])
        #expect(error == .linkEscapes(entry: "copy", target: "../outside/secret"))
        try Self.expectNothingOutside(root)
        try Self.expectStagingEmpty(root)
    }

    @Test("a device file and a FIFO are refused")
    func specialFiles() throws {
        let (device, _) = try Self.refusal([.device("dev/null")])
        #expect(device == .forbiddenType(entry: "dev/null", type: "character device"))
        let (fifo, _) = try Self.refusal([.fifo("pipe")])
        #expect(fifo == .forbiddenType(entry: "pipe", type: "FIFO"))
    }

    @Test("a leading ./ entry, as tar -C dir . writes, is the destination itself and unpacks")
    func dotEntry() throws {
        let (error, root) = try Self.refusal([.directory("./"), .directory("./part"), .file("./part/page.md", "text")])
        #expect(error == nil)
        #expect(try String(contentsOf: root.path("staging/part/page.md"), encoding: .utf8) == "text")
    }

    @Test("setuid and world-writable bits are masked off")
    func permissionsMasked() throws {
        let (error, root) = try Self.refusal([.file("tool", "#!/bin/sh\n", mode: 0o4777), .file("page.md", "text", mode: 0o666)])
        #expect(error == nil)
        let tool = try FileManager.default.attributesOfItem(atPath: root.path("staging/tool").path)[.posixPermissions] as? Int
        let page = try FileManager.default.attributesOfItem(atPath: root.path("staging/page.md").path)[.posixPermissions] as? Int
        #expect(tool == 0o755)
        #expect(page == 0o644)
    }

    /// A device unpacks with the default limits; the refusals below meet the same checks at a
    /// smaller scale. At the defaults they wrote 2.2 GiB and 200,000 files, 40 s of a test lane
    /// (run AB, 2026-11-30), and proved no more.
    @Test("the limits a device unpacks with: 100,000 entries, 1 GiB an entry, 1 GiB in all unless the archive is over 1/50 of it")
    func defaultLimits() {
        let limits = ExtractionLimits()
        #expect(limits.maxEntries == 100_000)
        #expect(limits.maxEntryBytes == 1 << 30)
        #expect(limits.maxTotalBytes(archiveSize: 4 << 20) == 1 << 30)
        #expect(limits.maxTotalBytes(archiveSize: 40 << 20) == 2_000 << 20)
    }

    @Test("zeros far larger than their small archive are refused as they unpack: an entry at its limit, entries split at the total")
    func zeroBomb() throws {
        let limits = ExtractionLimits(maxEntryBytes: 16 << 20, minimumTotalBytes: 16 << 20)
        let (error, root) = try Self.refusal([.zeros("zeros.bin", bytes: (16 << 20) + (1 << 20))], limits: limits)
        #expect(error == .entryTooLarge(entry: "zeros.bin", limit: 16 << 20))
        let archiveSize = try FileManager.default.attributesOfItem(atPath: root.path("hostile.archive").path)[.size] as? Int ?? 0
        #expect(archiveSize < 256 << 10)

        // Split over several entries, the total limit catches it.
        let (split, _) = try Self.refusal([.zeros("a.bin", bytes: 10 << 20), .zeros("b.bin", bytes: 10 << 20)], limits: limits)
        #expect(split == .totalTooLarge(limit: 16 << 20))
    }

    @Test("more entries than the limit are refused")
    func tooManyEntries() throws {
        let entries = (0..<2_000).map { HostileArchive.Entry.file("f/\($0)", "") }
        let (error, _) = try Self.refusal(entries, limits: ExtractionLimits(maxEntries: 1_000))
        #expect(error == .tooManyEntries(limit: 1_000))
    }

    @Test("a corrupt archive is reported as damaged")
    func corrupt() throws {
        let root = try TemporaryDirectory()
        let archive = root.path("book.tar.gz")
        let packed = try ContentPacker().pack(folder: ContentPackerTests.book, format: .tarGz, to: archive)
        var bytes = try Data(contentsOf: packed.file)
        bytes.replaceSubrange(200..<260, with: Data(repeating: 0x41, count: 60))
        try bytes.write(to: archive)
        try FileManager.default.createDirectory(at: root.path("out"), withIntermediateDirectories: true)
        #expect(throws: UnpackError.self) { try ArchiveExtractor().extract(archive, into: root.path("out")) }
    }

    @Test("zip and tar.gz unpack to exactly the files of their content folder", arguments: [ArchiveFormat.zip, .tarGz])
    func roundTrip(format: ArchiveFormat) throws {
        let root = try TemporaryDirectory()
        let folder = ContentPackerTests.book
        let packed = try ContentPacker().pack(folder: folder, format: format, to: root.path("book.\(format.fileExtension)"))
        try FileManager.default.createDirectory(at: root.path("out"), withIntermediateDirectories: true)
        let summary = try ArchiveExtractor().extract(packed.file, into: root.path("out"))
        #expect(summary.entries == 6)
        let original = try FolderSnapshot.files(in: folder)
        let unpacked = try FolderSnapshot.files(in: root.path("out"))
        #expect(unpacked == original)
        #expect(summary.archiveSHA256 == (try FileDigest.sha256(of: packed.file)))
    }

    @Test("an archive is hashed while it unpacks: the digest of several MiB, a zip read out of order, is the file's; a refused one stops the hash", arguments: [ArchiveFormat.zip, .tarGz])
    func hashedWhileUnpacking(format: ArchiveFormat) throws {
        let root = try TemporaryDirectory()
        let folder = root.path("content")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("pages"), withIntermediateDirectories: true)
        var generator = SystemRandomNumberGenerator()
        for page in 0..<3 {
            // Random bytes do not compress: the archive spans several of the hash's 1 MiB reads.
            let bytes = Data((0..<(1_500_000 + page)).map { _ in UInt8.random(in: 0...255, using: &generator) })
            try bytes.write(to: folder.appendingPathComponent("pages/\(page).bin"))
        }
        let packed = try ContentPacker().pack(folder: folder, format: format, to: root.path("pages.\(format.fileExtension)"))
        try FileManager.default.createDirectory(at: root.path("out"), withIntermediateDirectories: true)
        let summary = try ArchiveExtractor().extract(packed.file, into: root.path("out"))
        #expect(summary.archiveSHA256 == (try FileDigest.sha256(of: packed.file)))
        #expect(try FolderSnapshot.files(in: root.path("out")) == (try FolderSnapshot.files(in: folder)))

        // Refused at its second entry: the extraction returns its error, with the hash stopped
        // before the descriptor it reads is closed.
        try FileManager.default.createDirectory(at: root.path("small"), withIntermediateDirectories: true)
        #expect(throws: UnpackError.tooManyEntries(limit: 1)) {
            try ArchiveExtractor(limits: ExtractionLimits(maxEntries: 1)).extract(packed.file, into: root.path("small"))
        }
    }

    @Test("a folder, a FIFO or a device given as the archive is refused at once, naming what it is")
    func notAFile() throws {
        let root = try TemporaryDirectory()
        let folder = root.path("adir")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let fifo = root.path("fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        try FileManager.default.createDirectory(at: root.path("out"), withIntermediateDirectories: true)
        #expect(throws: UnpackError.disk(entry: nil, message: "cannot read adir: it is a folder")) {
            try ArchiveExtractor().extract(folder, into: root.path("out"))
        }
        #expect(throws: UnpackError.disk(entry: nil, message: "cannot read fifo: it is not a regular file")) {
            try ArchiveExtractor().extract(fifo, into: root.path("out"))
        }
        #expect(throws: UnpackError.disk(entry: nil, message: "cannot read zero: it is not a regular file")) {
            try ArchiveExtractor().extract(URL(fileURLWithPath: "/dev/zero"), into: root.path("out"))
        }
    }

    @Test("an archive's digest is the same made on a thread of its own or, when no thread can be made, on the caller's; a stop without a thread returns at once")
    func digestWithoutAThread() throws {
        let root = try TemporaryDirectory()
        let file = root.path("bytes")
        var generator = SystemRandomNumberGenerator()
        try Data((0..<2_500_000).map { _ in UInt8.random(in: 0...255, using: &generator) }).write(to: file)
        let expected = try FileDigest.sha256(of: file)
        let descriptor = open(file.path, O_RDONLY)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        for threadOfItsOwn in [true, false] {
            let digest = DescriptorDigest(descriptor, name: "bytes", threadOfItsOwn: threadOfItsOwn)
            #expect(try digest.value() == expected, "thread of its own: \(threadOfItsOwn)")
            digest.stop()
        }
        let stopped = DescriptorDigest(descriptor, name: "bytes", threadOfItsOwn: false)
        stopped.stop()
        #expect(throws: UnpackError.disk(entry: nil, message: "the hash of bytes was stopped")) { try stopped.value() }
    }
}
