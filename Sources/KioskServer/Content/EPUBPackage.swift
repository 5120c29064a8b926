import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import KioskArchive
import KioskCore

/// An EPUB's package document, read once with an XML parser: where `META-INF/container.xml` says
/// it is, that it is a `<package>` with `<metadata>`, what its Dublin Core says of the book, and
/// which manifest item is its cover.
///
/// The parser is Foundation's `XMLParser` (libxml2, with external entities left unresolved and
/// libxml2's own limits on entity expansion). It lives in the server, the one program that reads
/// a publisher's EPUB: `kiosk-server` links FoundationXML (statically, with the rest of
/// Foundation, in the release build) and libxml2 dynamically, which libarchive already brings to
/// the machine; the `kiosk` client, which only copies an EPUB into the library, links neither.
struct EPUBPackage: Sendable {
    /// The package document's path in the zip: the first `rootfile`'s `full-path`.
    let path: String
    /// The Dublin Core elements' text (`creator`, `language`, `identifier`, …), in document order.
    var dublinCore: [String: [String]] = [:]
    /// The manifest's items.
    var items: [Item] = []
    /// The item `<meta name="cover" content="…">` names (EPUB 2).
    var coverMeta: String?

    struct Item: Sendable {
        var id: String?
        var href: String?
        var properties: [String]
    }

    static let opf = "http://www.idpf.org/2007/opf"
    static let dublinCoreNamespace = "http://purl.org/dc/elements/1.1/"
    static let containerNamespace = "urn:oasis:names:tc:opendocument:xmlns:container"

    /// Reads the package document `container` (the OCF container, as ``PublicationCheck/checkEPUB(_:)``
    /// read it) names in `file`.
    /// - Throws: ``PublicationCheck/Refusal`` naming what is wrong.
    static func read(_ file: URL, container: Data) throws -> EPUBPackage {
        let containerReader = ElementReader()
        guard containerReader.parse(container) else {
            throw PublicationCheck.Refusal(reason: "META-INF/container.xml cannot be read: \(containerReader.problem)")
        }
        guard let path = containerReader.rootfile, !path.isEmpty else {
            throw PublicationCheck.Refusal(reason: "META-INF/container.xml names no rootfile full-path (the package document)")
        }
        guard let document = try PublicationCheck.zipEntries(file, reading: [path]).read[path] else {
            throw PublicationCheck.Refusal(reason: "META-INF/container.xml names \(ProductID.printable(path)), which is not in the archive")
        }
        let reader = ElementReader()
        guard reader.parse(document) else {
            throw PublicationCheck.Refusal(reason: "its package document \(ProductID.printable(path)) cannot be read: \(reader.problem)")
        }
        guard let root = reader.root, root == (Self.opf, "package"), reader.sawMetadata else {
            throw PublicationCheck.Refusal(reason: "its package document \(ProductID.printable(path)) is not a <package> document with <metadata>")
        }
        return EPUBPackage(path: path, dublinCore: reader.dublinCore, items: reader.items, coverMeta: reader.coverMeta)
    }

    /// What the package says of the book in Dublin Core: its creators (authors), language, ISBN
    /// (an identifier that is one), publisher, subjects and description.
    var metadata: PublicationMetadata {
        func values(_ name: String) -> [String] { dublinCore[name] ?? [] }
        var metadata = PublicationMetadata()
        let creators = values("creator")
        metadata.contributors = creators.isEmpty ? nil : creators.map { PublicationMetadata.Contributor(name: $0, role: "author") }
        metadata.language = values("language").first.flatMap { PublicationMetadata.isLanguageTag($0) ? $0 : nil }
        metadata.publisher = values("publisher").first
        let isbns = values("identifier").compactMap { identifier in
            PublicationMetadata.isbn(identifier.lowercased().hasPrefix("urn:isbn:") ? String(identifier.dropFirst(9)) : identifier)
        }
        metadata.identifiers = isbns.isEmpty ? nil : Array(isbns.prefix(1))
        let subjects = values("subject")
        metadata.subjects = subjects.isEmpty ? nil : Array(subjects.prefix(20))
        metadata.description = values("description").first
        return metadata
    }

    /// The cover image's path in the zip: the manifest item whose `properties` include
    /// `cover-image` (EPUB 3), or the one `<meta name="cover" content="…">` names (EPUB 2).
    var coverPath: String? {
        let item = items.first { $0.properties.contains("cover-image") } ?? coverMeta.flatMap { id in items.first { $0.id == id } }
        return item?.href.flatMap { Self.resolve($0, against: path) }
    }

    /// The cover image's bytes, when there is one no larger than ``CoverImage/maxBytes``.
    func cover(in file: URL) -> Data? {
        guard let coverPath,
              let bytes = try? PublicationCheck.zipEntries(file, reading: [coverPath], limit: CoverImage.maxBytes).read[coverPath],
              !bytes.isEmpty, bytes.count <= CoverImage.maxBytes else { return nil }
        return bytes
    }

    /// A package document's `href` as a path in the zip: relative to the document's folder,
    /// percent-decoded, with `..` taken back; nil when it leaves the zip or is a URL.
    static func resolve(_ href: String, against document: String) -> String? {
        guard !href.contains(":"), !href.hasPrefix("/") else { return nil }
        var parts = document.split(separator: "/").dropLast().map(String.init)
        for part in (href.removingPercentEncoding ?? href).split(separator: "/") {
            switch part {
            case ".": continue
            case "..":
                guard !parts.isEmpty else { return nil }
                parts.removeLast()
            default: parts.append(String(part))
            }
        }
        return parts.isEmpty ? nil : parts.joined(separator: "/")
    }
}

/// The elements of a container or package document that Kiosk reads, gathered in one parse.
private final class ElementReader: NSObject, XMLParserDelegate {
    /// The document element's namespace and name.
    var root: (String, String)?
    var rootfile: String?
    var sawMetadata = false
    var dublinCore: [String: [String]] = [:]
    var items: [EPUBPackage.Item] = []
    var coverMeta: String?
    var problem = ""
    /// The Dublin Core element whose text is being read.
    private var reading: String?
    private var text = ""
    /// A hostile document's size is bounded by the read limit; its counts are bounded here.
    private static let maxValues = 50
    private static let maxItems = 10_000

    static func isShownAsSpace(_ value: UInt32) -> Bool {
        value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x061C || (0x200B...0x200F).contains(value)
            || (0x2028...0x202E).contains(value) || (0x2066...0x2069).contains(value)
    }

    func parse(_ data: Data) -> Bool {
        // EPUB 3.3 allows no entity declarations in a package document, and libxml2 (2.9) bounds
        // neither the expansion of one large entity used many times nor the time it takes: a
        // 5 KB EPUB held a start for minutes. A document that declares one is refused unread.
        if data.range(of: Data("<!ENTITY".utf8)) != nil {
            problem = "it declares XML entities (<!ENTITY>), which EPUB 3.3 does not allow"
            return false
        }
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = self
        // Foundation on Linux can answer true for a document libxml2 reported an error in: the
        // error the delegate heard counts too.
        let parsed = parser.parse()
        if !parsed, problem.isEmpty { problem = "it is not well-formed XML" }
        return parsed && problem.isEmpty
    }

    func parser(_ parser: XMLParser, parseErrorOccurred error: any Error) {
        if problem.isEmpty { problem = "it is not well-formed XML (at line \(parser.lineNumber), column \(parser.columnNumber))" }
        parser.abortParsing()
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        let namespace = namespaceURI ?? ""
        if root == nil { root = (namespace, name) }
        switch (namespace, name) {
        case (EPUBPackage.containerNamespace, "rootfile") where rootfile == nil:
            rootfile = attributes["full-path"]
        case (EPUBPackage.opf, "metadata"):
            sawMetadata = true
        case (EPUBPackage.opf, "item") where items.count < Self.maxItems:
            items.append(EPUBPackage.Item(id: attributes["id"], href: attributes["href"],
                                          properties: (attributes["properties"] ?? "").split(separator: " ").map(String.init)))
        case (EPUBPackage.opf, "meta") where attributes["name"] == "cover":
            coverMeta = attributes["content"]
        case (EPUBPackage.dublinCoreNamespace, _) where (dublinCore[name]?.count ?? 0) < Self.maxValues:
            reading = name
            text = ""
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if reading != nil, text.utf8.count <= 4_000 { text += string }
    }

    func parser(_ parser: XMLParser, foundCDATA block: Data) {
        if reading != nil, text.utf8.count <= 4_000 { text += String(decoding: block.prefix(4_000), as: UTF8.self) }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        guard let reading, reading == name, namespaceURI == EPUBPackage.dublinCoreNamespace else { return }
        self.reading = nil
        // Metadata reaches terminals and pages: control characters (C0, DEL, C1), line and
        // paragraph separators and the bidirectional controls (which reorder what follows them)
        // become spaces.
        let value = String(String.UnicodeScalarView(text.unicodeScalars.map { Self.isShownAsSpace($0.value) ? " " : $0 }))
            .trimmingCharacters(in: .whitespacesAndNewlines)
        if !value.isEmpty, value.utf8.count <= 2_000 { dublinCore[name, default: []].append(value) }
    }
}
