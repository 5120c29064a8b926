import Foundation
import KioskArchive
import KioskCore
import KioskTestSupport
import Testing

@Suite("Deterministic packing")
struct ContentPackerTests {
    static let book = SampleStore.repository.appendingPathComponent("Content/books/lighthouse-keeper")

    @Test("packing the same folder twice gives the same bytes", arguments: [ArchiveFormat.zip, .tarGz])
    func sameFolderSameDigest(format: ArchiveFormat) throws {
        let directory = try TemporaryDirectory()
        let copy = directory.path("book")
        try FileManager.default.copyItem(at: Self.book, to: copy)

        let first = try ContentPacker().pack(folder: copy, format: format, to: directory.path("first.\(format.fileExtension)"))
        // Another copy, made later, with other modification times: the archive must not change.
        let later = directory.path("later-copy")
        try FileManager.default.copyItem(at: copy, to: later)
        let chapter = later.appendingPathComponent("chapters/01-the-lamp.md")
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -86_400 * 30)], ofItemAtPath: chapter.path)
        Thread.sleep(forTimeInterval: 1.1)
        let second = try ContentPacker().pack(folder: later, format: format, to: directory.path("second.\(format.fileExtension)"))

        #expect(first.sha256 == second.sha256)
        #expect(first.size == second.size)
        #expect(try FileDigest.sha256(of: first.file) == first.sha256)
        #expect(try Data(contentsOf: first.file) == Data(contentsOf: second.file))
    }

    @Test("a changed file changes the digest")
    func changedContentChangesDigest() throws {
        let directory = try TemporaryDirectory()
        let copy = directory.path("book")
        try FileManager.default.copyItem(at: Self.book, to: copy)
        let before = try ContentPacker().pack(folder: copy, format: .zip, to: directory.path("a.zip"))
        try Data("# The Lamp\n\nRevised.\n".utf8).write(to: copy.appendingPathComponent("chapters/01-the-lamp.md"))
        let after = try ContentPacker().pack(folder: copy, format: .zip, to: directory.path("b.zip"))
        #expect(before.sha256 != after.sha256)
    }

    @Test("a tar.gz holds exactly the files of its folder")
    func tarGzListsTheFolder() throws {
        let directory = try TemporaryDirectory()
        let packed = try ContentPacker().pack(folder: Self.book, format: .tarGz, to: directory.path("book.tar.gz"))
        let listing = try run("/usr/bin/env", ["tar", "-tzf", packed.file.path])
        let files = listing.split(separator: "\n").map(String.init).filter { !$0.hasSuffix("/") }.sorted()
        #expect(files == ["chapters/01-the-lamp.md", "chapters/02-the-weather.md", "chapters/03-the-visitor.md", "cover.svg", "manifest.json"])
    }

    @Test("a zip holds exactly the files of its folder, byte for byte")
    func zipHoldsTheFolder() throws {
        let directory = try TemporaryDirectory()
        let packed = try ContentPacker().pack(folder: Self.book, format: .zip, to: directory.path("book.zip"))
        try run("/usr/bin/env", ["python3", "-m", "zipfile", "-e", packed.file.path, directory.path("out").path])
        for name in ["chapters/01-the-lamp.md", "cover.svg", "manifest.json"] {
            let original = try Data(contentsOf: Self.book.appendingPathComponent(name))
            let unpacked = try Data(contentsOf: directory.path("out/\(name)"))
            #expect(original == unpacked, "\(name) differs after a round trip")
        }
    }

    @Test("a symlink in a content folder is refused by name")
    func symlinkRefused() throws {
        let directory = try TemporaryDirectory()
        let folder = directory.path("book")
        try directory.write("book/chapter.md", "text")
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("passwd").path, withDestinationPath: "/etc/passwd")
        #expect {
            try ContentPacker().pack(folder: folder, format: .zip, to: directory.path("book.zip"))
        } throws: { error in
            "\(error)".contains("passwd") && "\(error)".contains("symbolic link")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path("book.zip").path))
    }

    @Test("gzip of a body decompresses to the same bytes and is stable")
    func gzipRoundTrip() throws {
        let directory = try TemporaryDirectory()
        let body = Data(String(repeating: "{\"id\":\"com.kiosk.books.x\"},", count: 2000).utf8)
        let compressed = try Gzip.compress(body)
        #expect(compressed.count < body.count / 10)
        #expect(try Gzip.compress(body) == compressed)
        try compressed.write(to: directory.path("body.gz"))
        try run("/usr/bin/env", ["gzip", "-d", directory.path("body.gz").path])
        #expect(try Data(contentsOf: directory.path("body")) == body)
    }

    @discardableResult
    func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        try process.runAlone()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitForExit()
        #expect(process.terminationStatus == 0, "\(arguments.joined(separator: " ")) failed")
        return String(decoding: data, as: UTF8.self)
    }
}
