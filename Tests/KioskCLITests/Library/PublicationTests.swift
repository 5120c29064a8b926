import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// Publications delivered as the files they are (issue 47): an EPUB made by Python's zipfile
/// (`scripts/make_epub.py`), a PDF and a CBZ, checked by the store before it sells them and
/// installed byte for byte, with `epubcheck` and `qpdf --check` as the independent judges.
@Suite("Publications as files: EPUB, PDF, CBZ")
struct PublicationTests {
    static let epubBook = "com.kiosk.books.harbor-tales"
    static let pdfIssue = "com.kiosk.books.tide-atlas"
    static let comic = "com.kiosk.books.gull-comics"
    /// Debian's epubcheck, run as the jar it is (its /usr/bin launcher needs a binfmt handler).
    static let epubcheck = "/usr/share/java/epubcheck.jar"

    /// epubcheck's verdict on `file`. The JVM stops at its first compiler and uses the serial
    /// collector: a check is seconds long, and the optimizing compiler's threads doubled its CPU
    /// (10.6 against 5.5 s of CPU for one of the bundled EPUBs, same verdict; 2026-11-30). Without
    /// its performance counters the JVM leaves no /tmp/hsperfdata_USER behind (it ignores TMPDIR).
    static func checkEPUB(_ file: String) throws -> (status: Int32, output: String) {
        try ToolProcess.run("/usr/bin/java", ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-jar", Self.epubcheck, file])
    }

    static func run(_ tool: String, _ arguments: [String], in directory: URL? = nil) throws -> (status: Int32, output: String) {
        try ToolProcess.run(tool, arguments, in: directory)
    }

    /// An EPUB made by Python's zipfile, whole or damaged.
    static func epub(_ file: URL, damage: String? = nil, chapters: Int = 3) throws {
        let script = SampleStore.repository.appendingPathComponent("scripts/make_epub.py").path
        let made = try run("/usr/bin/python3", [script, file.path, "--title", "Harbor Tales", "--author", "M. Ferris", "--chapters", String(chapters)]
                           + (damage.map { ["--break", $0] } ?? []))
        try #require(made.status == 0, "make_epub.py failed: \(made.output)")
    }

    /// A one-page PDF with a correct cross-reference table (what qpdf --check reads).
    static func pdf() -> Data {
        let objects = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] /Contents 4 0 R /Resources << >> >>",
            "<< /Length 0 >>\nstream\n\nendstream",
        ]
        var text = "%PDF-1.4\n"
        var offsets: [Int] = []
        for (index, object) in objects.enumerated() {
            offsets.append(text.utf8.count)
            text += "\(index + 1) 0 obj\n\(object)\nendobj\n"
        }
        let xref = text.utf8.count
        text += "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
        for offset in offsets { text += String(format: "%010d 00000 n \n", offset) }
        text += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
        return Data(text.utf8)
    }

    /// A CBZ of two PNG pages (and, with `intruder`, a file that is no image).
    static func cbz(_ file: URL, intruder: Bool = false) throws {
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
        let code = """
            import base64, sys, zipfile
            with zipfile.ZipFile(sys.argv[1], "w") as z:
                for n in (1, 2):
                    z.writestr(f"pages/{n:03d}.png", base64.b64decode("\(png)"))
                if sys.argv[2] == "1":
                    z.writestr("pages/readme.txt", "not a page")
            """
        let made = try run("/usr/bin/python3", ["-c", code, file.path, intruder ? "1" : "0"])
        try #require(made.status == 0, "making the CBZ failed: \(made.output)")
    }

    /// The sample store with an EPUB book, a PDF and a CBZ added as products.
    static func store(in directory: TemporaryDirectory) throws -> SampleStore {
        let store = try SampleStore(in: directory)
        let folder = store.content.appendingPathComponent("publications")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try epub(folder.appendingPathComponent("Harbor Tales.epub"))
        try pdf().write(to: folder.appendingPathComponent("tide-atlas.pdf"))
        try cbz(folder.appendingPathComponent("gull-comics.cbz"))
        try store.editCatalog("books.json") { products in
            for (id, file, format) in [(epubBook, "Harbor Tales.epub", "epub"), (pdfIssue, "tide-atlas.pdf", "pdf"), (comic, "gull-comics.cbz", "cbz")] {
                var product = products[0]
                product["id"] = id
                product["title"] = id
                product["content"] = ["path": "publications/\(file)", "format": format]
                products.append(product)
            }
        }
        return store
    }

    @Test("an EPUB, a PDF and a CBZ bought are installed as the publisher's files, byte for byte; epubcheck and qpdf pass what the device installed; kiosk open prints the file")
    func installedAsFiles() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.epubcheck), "epubcheck is missing: apt-get install epubcheck (make test-tools)")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/qpdf"), "qpdf is missing: apt-get install qpdf (make test-tools)")
        let directory = try TemporaryDirectory()
        let store = try Self.store(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        for (id, file) in [(Self.epubBook, "Harbor Tales.epub"), (Self.pdfIssue, "tide-atlas.pdf"), (Self.comic, "gull-comics.cbz")] {
            let bought = try await KioskCommand.run(["buy", id], environment: home)
            #expect(bought.status == 0, "\(id): \(bought.stdout)\(bought.stderr)")
            let opened = try await KioskCommand.run(["open", id], environment: home)
            let installed = opened.stdout.trimmingCharacters(in: .newlines)
            #expect(installed == directory.path("home").path + "/Library/\(id)/\(file)", "\(id): \(opened)")
            let publisher = store.content.appendingPathComponent("publications/\(file)")
            #expect(try FileDigest.sha256(of: URL(fileURLWithPath: installed)) == FileDigest.sha256(of: publisher), "\(id): the installed file is the publisher's")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("home").path + "/Library/\(id)") == [file], "\(id): the file alone")
        }
        let checked = try Self.checkEPUB(directory.path("home").path + "/Library/\(Self.epubBook)/Harbor Tales.epub")
        #expect(checked.status == 0, "epubcheck: \(checked.output)")
        let qpdf = try Self.run("/usr/bin/qpdf", ["--check", directory.path("home").path + "/Library/\(Self.pdfIssue)/tide-atlas.pdf"])
        #expect(qpdf.status == 0, "qpdf: \(qpdf.output)")
        _ = await server.stop()
    }

    @Test("the bundled store's publications pass their judges: epubcheck for each EPUB, qpdf --check for the PDF issue")
    func bundledSamplesValid() throws {
        try #require(FileManager.default.fileExists(atPath: Self.epubcheck), "epubcheck is missing: apt-get install epubcheck (make test-tools)")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/qpdf"), "qpdf is missing: apt-get install qpdf (make test-tools)")
        let folder = SampleStore.repository.appendingPathComponent("Content/publications")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(files.filter { $0.hasSuffix(".epub") }.count == 2 && files.filter { $0.hasSuffix(".pdf") }.count == 1, "\(files)")
        for file in files where file.hasSuffix(".epub") {
            let checked = try Self.checkEPUB(folder.appendingPathComponent(file).path)
            #expect(checked.status == 0 && checked.output.contains("0 fatals / 0 errors / 0 warnings"), "\(file): \(checked.output)")
        }
        for file in files where file.hasSuffix(".pdf") {
            let checked = try Self.run("/usr/bin/qpdf", ["--check", folder.appendingPathComponent(file).path])
            #expect(checked.status == 0, "\(file): \(checked.output)")
        }
    }

    @Test("hostile EPUBs are refused at start, naming the product and the reason: a damaged entry, an entry leaving the folder, a link, a zip bomb, an extra field in mimetype, a name given twice; a pipe as content too")
    func hostileRefused() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let folder = store.content.appendingPathComponent("publications")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Self.epub(directory.path("good.epub"))
        let made = try Self.run("/usr/bin/python3", [SampleStore.repository.appendingPathComponent("scripts/hostile_epubs.py").path, directory.path("good.epub").path, folder.path])
        try #require(made.status == 0, "\(made.output)")
        let cases = [("badcrc.epub", "cannot read OEBPS/chapter-1.xhtml whole"), ("slip.epub", "which would land outside a reader's folder"),
                     ("link.epub", "a link or special file"), ("bomb.epub", "a zip bomb"),
                     ("extra.epub", "its mimetype entry has an extra field"), ("twice.epub", "OEBPS/chapter-1.xhtml twice")]
        for (index, (file, says)) in cases.enumerated() {
            try store.editCatalog("books.json") { products in
                products[0]["content"] = ["path": "publications/\(file)", "format": "epub"]
            }
            let started = try await KioskCommand.run([
                "serve", "--catalog", store.catalog.path, "--content", store.content.path, "--data", directory.path("data-\(index)").path, "--port", "0",
            ])
            let line = started.stderr.split(separator: "\n").last.map(String.init) ?? ""
            #expect(started.status == 1 && line.contains("product \"com.kiosk.books.lighthouse-keeper\"") && line.contains(says), "\(file): \(started.stderr)")
        }
        // A pipe where a file should be would block every start: refused before it is opened.
        #expect(mkfifo(folder.appendingPathComponent("pipe.pdf").path, 0o644) == 0)
        try store.editCatalog("books.json") { products in
            products[0]["content"] = ["path": "publications/pipe.pdf", "format": "pdf"]
        }
        let piped = try await KioskCommand.run(["serve", "--catalog", store.catalog.path, "--content", store.content.path, "--data", directory.path("data-pipe").path, "--port", "0"])
        #expect(piped.status == 1 && piped.stderr.contains("is not a regular file or folder"), "\(piped.stderr)")
    }

    @Test("a file that is not the publication it says is refused at start, naming the file, the product and the reason")
    func refusedAtStart() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let folder = store.content.appendingPathComponent("publications")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var cases: [(file: String, format: String, says: String)] = []
        for damage in ["mimetype", "compressed", "container", "package"] {
            try Self.epub(folder.appendingPathComponent("\(damage).epub"), damage: damage)
        }
        cases += [("mimetype.epub", "epub", "its first entry is not mimetype"), ("compressed.epub", "epub", "its mimetype entry is compressed"),
                  ("container.epub", "epub", "it has no META-INF/container.xml"), ("package.epub", "epub", "which is not in the archive")]
        try Data("%PDF-1.4\n1 0 obj << >> endobj\n".utf8).write(to: folder.appendingPathComponent("cut.pdf"))
        try Data("hello\n%%EOF\n".utf8).write(to: folder.appendingPathComponent("headless.pdf"))
        cases += [("cut.pdf", "pdf", "it has no %%EOF marker"), ("headless.pdf", "pdf", "it does not begin with the %PDF- header")]
        try Self.cbz(folder.appendingPathComponent("mixed.cbz"), intruder: true)
        cases += [("mixed.cbz", "cbz", "pages/readme.txt, which is not an image")]
        // The declared format must match: a PDF said to be an EPUB, an EPUB said to be a PDF.
        try Self.pdf().write(to: folder.appendingPathComponent("real.pdf"))
        try Self.epub(folder.appendingPathComponent("real.epub"))
        cases += [("real.pdf", "epub", "it is not a zip container"), ("real.epub", "pdf", "it does not begin with the %PDF- header")]
        for (index, (file, format, says)) in cases.enumerated() {
            try store.editCatalog("books.json") { products in
                products[0]["content"] = ["path": "publications/\(file)", "format": format]
            }
            let started = try await KioskCommand.run([
                "serve", "--catalog", store.catalog.path, "--content", store.content.path, "--data", directory.path("data-\(index)").path, "--port", "0",
            ])
            let line = started.stderr.split(separator: "\n").last.map(String.init) ?? ""
            #expect(started.status == 1 && line.contains("books.json: product \"com.kiosk.books.lighthouse-keeper\"")
                    && line.contains("\(file) is not a valid \(format): ") && line.contains(says), "\(file) as \(format): \(started.stderr)")
        }
        // A folder cannot be a publication.
        try store.editCatalog("books.json") { products in
            products[0]["content"] = ["path": "books/lighthouse-keeper", "format": "epub"]
        }
        let folderRefused = try await KioskCommand.run(["serve", "--catalog", store.catalog.path, "--content", store.content.path, "--data", directory.path("data-f").path, "--port", "0"])
        #expect(folderRefused.status == 1 && folderRefused.stderr.contains("delivered as the publisher's own file"), "\(folderRefused.stderr)")
    }
}
