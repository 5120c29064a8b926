import Foundation
import KioskArchive
import KioskCore
import KioskTestSupport
import Testing

@Suite("Content manifests: every entry, and where a zip holds it")
struct ContentManifestTests {
    static let book = SampleStore.repository.appendingPathComponent("Content/books/lighthouse-keeper")

    @Test("each zip entry's range, fetched on its own, unpacks to exactly the file the manifest names")
    func zipRangesUnpack() throws {
        let directory = try TemporaryDirectory()
        let packed = try ContentPacker().pack(folder: Self.book, format: .zip, to: directory.path("book.zip"))
        let manifest = try ContentManifest.build(archive: packed.file, format: .zip, sha256: packed.sha256)
        #expect(manifest.hasRanges)
        #expect(manifest.archiveSize == packed.size)
        let archive = try Data(contentsOf: packed.file)
        let files = try FolderSnapshot.files(in: Self.book)
        #expect(Set(manifest.entries.filter { $0.kind == .file }.map(\.path)) == Set(files.keys))
        for entry in manifest.entries where entry.kind == .file {
            let offset = try #require(entry.offset), length = try #require(entry.length)
            let range = archive.subdata(in: Int(offset)..<Int(offset + length))
            let out = directory.path("out-\(UUID().uuidString)")
            try ZipEntryReader().unpack(range, as: entry, to: out)
            #expect(try Data(contentsOf: out) == files[entry.path])
        }
        // The same archive always gives the same manifest bytes.
        #expect(try manifest.encoded() == ContentManifest.build(archive: packed.file, format: .zip, sha256: packed.sha256).encoded())
    }

    @Test("another entry's bytes, or bytes that do not hash, are refused and leave no file")
    func wrongRangeRefused() throws {
        let directory = try TemporaryDirectory()
        let packed = try ContentPacker().pack(folder: Self.book, format: .zip, to: directory.path("book.zip"))
        let manifest = try ContentManifest.build(archive: packed.file, format: .zip, sha256: packed.sha256)
        let archive = try Data(contentsOf: packed.file)
        let files = manifest.entries.filter { $0.kind == .file }
        try #require(files.count >= 2)
        let (first, second) = (files[0], files[1])
        let out = directory.path("out")
        let secondBytes = archive.subdata(in: Int(second.offset ?? 0)..<Int((second.offset ?? 0) + (second.length ?? 0)))
        #expect(throws: ZipEntryReader.Mismatch.self) { try ZipEntryReader().unpack(secondBytes, as: first, to: out) }
        #expect(!FileManager.default.fileExists(atPath: out.path))
        var lying = first
        lying.sha256 = String(repeating: "0", count: 64)
        let firstBytes = archive.subdata(in: Int(first.offset ?? 0)..<Int((first.offset ?? 0) + (first.length ?? 0)))
        #expect(throws: ZipEntryReader.Mismatch.self) { try ZipEntryReader().unpack(firstBytes, as: lying, to: out) }
        #expect(!FileManager.default.fileExists(atPath: out.path))
    }

    @Test("a tar.gz manifest lists every entry with its hash and no ranges")
    func tarGzHasNoRanges() throws {
        let directory = try TemporaryDirectory()
        let packed = try ContentPacker().pack(folder: Self.book, format: .tarGz, to: directory.path("book.tar.gz"))
        let manifest = try ContentManifest.build(archive: packed.file, format: .tarGz, sha256: packed.sha256)
        #expect(!manifest.hasRanges)
        let files = try FolderSnapshot.files(in: Self.book)
        #expect(Set(manifest.entries.filter { $0.kind == .file }.map(\.path)) == Set(files.keys))
        #expect(manifest.entries.filter { $0.kind == .file }.allSatisfy { $0.sha256 == FileDigest.sha256(of: files[$0.path] ?? Data()) })
    }
}
