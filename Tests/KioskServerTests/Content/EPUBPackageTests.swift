import Foundation
import KioskArchive
@testable import KioskServer
import KioskTestSupport
import Testing

/// The package document read by an XML parser, not scanned for strings: what a scanner got
/// wrong (a comment, an entity, CDATA, a namespace prefix) is read as XML means it.
@Suite("An EPUB's package document, read with an XML parser")
struct EPUBPackageTests {
    /// An EPUB made by Python's zipfile (a tool other than Kiosk): `mimetype` first and stored,
    /// then `container` as META-INF/container.xml and each of `files`.
    static func epub(_ file: URL, container: String, files: [String: String]) throws {
        let script = """
            import json, sys, zipfile
            container, files = json.loads(sys.argv[2]), json.loads(sys.argv[3])
            with zipfile.ZipFile(sys.argv[1], "w") as z:
                z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
                z.writestr("META-INF/container.xml", container, zipfile.ZIP_DEFLATED)
                for name, text in files.items():
                    z.writestr(name, text, zipfile.ZIP_DEFLATED)
            """
        let encode = { (value: Any) in String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]), as: UTF8.self) }
        let made = try ToolProcess.run("/usr/bin/python3", ["-c", script, file.path, try encode(container), try encode(files)])
        try #require(made.status == 0, "python3 zipfile failed: \(made.output)")
    }

    /// A container naming its rootfile with a namespace prefix, as OCF allows.
    static let prefixedContainer = """
        <?xml version="1.0"?>
        <c:container version="1.0" xmlns:c="urn:oasis:names:tc:opendocument:xmlns:container">
          <c:rootfiles><c:rootfile full-path="book/package.opf" media-type="application/oebps-package+xml"/></c:rootfiles>
        </c:container>
        """

    static func read(_ package: String, container: String = prefixedContainer, extra: [String: String] = [:]) throws -> EPUBPackage {
        let directory = try TemporaryDirectory()
        let file = directory.path("book.epub")
        try epub(file, container: container, files: ["book/package.opf": package].merging(extra) { first, _ in first })
        return try EPUBPackage.read(file, container: try PublicationCheck.checkEPUB(file))
    }

    @Test("a comment, an entity, CDATA and an EPUB 2 cover are read as XML means them; a prefixed rootfile is found")
    func readsAsXML() throws {
        let directory = try TemporaryDirectory()
        let file = directory.path("book.epub")
        try Self.epub(file, container: Self.prefixedContainer, files: [
            "book/package.opf": """
                <?xml version="1.0" encoding="UTF-8"?>
                <package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
                  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
                    <!-- <dc:creator>Not the author</dc:creator> -->
                    <dc:identifier id="id">urn:isbn:9780306406157</dc:identifier>
                    <dc:creator>M. &amp; N. Ferris</dc:creator>
                    <dc:subject>Sea\u{202E}stories\u{2028}</dc:subject>
                    <dc:language>en</dc:language>
                    <dc:description><![CDATA[Tales of <b>the</b> harbor]]></dc:description>
                    <meta name="cover" content="the-cover"/>
                  </metadata>
                  <manifest><item id="the-cover" href="images/cover%20art.png" media-type="image/png"/></manifest>
                  <spine/>
                </package>
                """,
            "book/images/cover art.png": "picture",
        ])
        let package = try EPUBPackage.read(file, container: try PublicationCheck.checkEPUB(file))
        #expect(package.path == "book/package.opf")
        let metadata = package.metadata
        #expect(metadata.contributors?.map(\.name) == ["M. & N. Ferris"], "\(metadata)")
        #expect(metadata.language == "en")
        #expect(metadata.subjects == ["Sea stories"], "a right-to-left override or a line separator shows as a space")
        #expect(metadata.identifiers == ["urn:isbn:9780306406157"])
        #expect(metadata.description == "Tales of <b>the</b> harbor")
        #expect(package.coverPath == "book/images/cover art.png")
        #expect(package.cover(in: file) == Data("picture".utf8))
    }

    @Test("a package document that is not well-formed, or not an OPF <package> with <metadata>, is refused naming it")
    func refusals() throws {
        let unclosed = #expect(throws: PublicationCheck.Refusal.self) {
            try Self.read(#"<package xmlns="http://www.idpf.org/2007/opf"><metadata></package>"#)
        }
        #expect(unclosed?.reason.contains("book/package.opf cannot be read: it is not well-formed XML (at line 1") == true, "\(String(describing: unclosed))")
        let foreign = #expect(throws: PublicationCheck.Refusal.self) {
            try Self.read(#"<package xmlns="urn:not-opf"><metadata/></package>"#)
        }
        #expect(foreign?.reason.contains("is not a <package> document with <metadata>") == true, "\(String(describing: foreign))")
        let bare = #expect(throws: PublicationCheck.Refusal.self) {
            try Self.read(#"<package xmlns="http://www.idpf.org/2007/opf"><!-- <metadata/> --></package>"#)
        }
        #expect(bare?.reason.contains("is not a <package> document with <metadata>") == true)
        let missing = #expect(throws: PublicationCheck.Refusal.self) {
            try Self.read("<package/>", container: #"<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="elsewhere.opf"/></rootfiles></container>"#)
        }
        #expect(missing?.reason.contains("elsewhere.opf, which is not in the archive") == true)
        // One large entity used many times (libxml2 2.9 bounds neither): refused before it is parsed.
        let expansion = #expect(throws: PublicationCheck.Refusal.self) {
            try Self.read("""
                <?xml version="1.0"?>
                <!DOCTYPE package [<!ENTITY b "\(String(repeating: "A", count: 10_000))">]>
                <package xmlns="http://www.idpf.org/2007/opf"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator>\(String(repeating: "&b;", count: 10_000))</dc:creator></metadata></package>
                """)
        }
        #expect(expansion?.reason.contains("declares XML entities") == true, "\(String(describing: expansion))")
        // An external entity is never fetched: the document is refused, or read without it.
        do {
            let read = try Self.read("""
                <?xml version="1.0"?>
                <!DOCTYPE package [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
                <package xmlns="http://www.idpf.org/2007/opf"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator>&secret;</dc:creator></metadata></package>
                """)
            #expect(!(read.metadata.contributors ?? []).contains { $0.name.contains("root:") }, "\(read.metadata)")
        } catch is PublicationCheck.Refusal {
        }
    }
}
