import Foundation
import KioskCore
#if canImport(FoundationXML)
import FoundationXML
#endif

/// The OPDS feeds (``OPDSFeeds``: one model for both formats) as OPDS 1.2
/// (https://specs.opds.io/opds-1.2): Atom documents that Moon+ Reader, Librera, Panels, KyBook,
/// calibre and most KOReader installs read. Written with Foundation's XML tree, so every text and
/// attribute is escaped by libxml2, never put together by hand.
///
/// A 2.0 navigation link is a 1.2 navigation entry; a publication an acquisition entry with its
/// acquisition link, `opds:price` and `opds:indirectAcquisition`, its cover as
/// `http://opds-spec.org/image` and `…/thumbnail`, and its shop page as `alternate`. The search
/// link names the OpenSearch description (``openSearchDescription(base:root:)``), as 1.x apps
/// expect, not a URI template.
enum OPDSAtom {
    static let atom = "http://www.w3.org/2005/Atom"
    static let opds = "http://opds-spec.org/2010/catalog"
    static let dcterms = "http://purl.org/dc/terms/"
    static let openSearchNamespace = "http://a9.com/-/spec/opensearch/1.1/"

    static let navigationType = "application/atom+xml;profile=opds-catalog;kind=navigation"
    static let acquisitionType = "application/atom+xml;profile=opds-catalog;kind=acquisition"
    static let entryType = "application/atom+xml;type=entry;profile=opds-catalog"
    static let openSearchType = "application/opensearchdescription+xml"

    enum Kind {
        case navigation, acquisition

        var type: String { self == .navigation ? OPDSAtom.navigationType : OPDSAtom.acquisitionType }
    }

    /// `feed` as an OPDS 1.2 catalog document. `updated` is the catalog's (``updated(_:)``), so a
    /// feed's bytes, and its ETag, change only with the catalog.
    static func document(_ feed: OPDSFeeds.Feed, kind: Kind, updated: String, storeTitle: String, openSearch: String) -> Data {
        let root = XMLElement(name: "feed", uri: atom)
        for (prefix, uri) in [("", atom), ("opds", opds), ("dc", dcterms), ("opensearch", openSearchNamespace)] {
            if let namespace = XMLNode.namespace(withName: prefix, stringValue: uri) as? XMLNode { root.addNamespace(namespace) }
        }
        let selfHref = feed.links.first { $0.rel == "self" }?.href ?? ""
        root.addChild(text("id", selfHref))
        root.addChild(text("title", feed.metadata.title))
        root.addChild(text("updated", updated))
        root.addChild(person("author", storeTitle))
        if let total = feed.metadata.numberOfItems, let perPage = feed.metadata.itemsPerPage, let page = feed.metadata.currentPage {
            root.addChild(text("opensearch:totalResults", String(total)))
            root.addChild(text("opensearch:itemsPerPage", String(perPage)))
            root.addChild(text("opensearch:startIndex", String((page - 1) * perPage + 1)))
        }
        for link in feed.links {
            if link.rel == "search" {
                root.addChild(self.link(rel: "search", href: openSearch, type: openSearchType))
                continue
            }
            root.addChild(self.link(rel: link.rel, href: link.href, type: feedType(of: link, kind: kind), title: link.title))
        }
        // Facets as OPDS 1.2 writes them: a link each, its group and whether it is the one shown.
        for group in feed.facets ?? [] {
            for facet in group.links {
                let element = link(rel: "http://opds-spec.org/facet", href: facet.href, type: acquisitionType, title: facet.title)
                for (name, value) in [("opds:facetGroup", group.metadata.title)] + (facet.rel == "self" ? [("opds:activeFacet", "true")] : []) {
                    if let attribute = XMLNode.attribute(withName: name, uri: opds, stringValue: xmlText(value)) as? XMLNode { element.addAttribute(attribute) }
                }
                root.addChild(element)
            }
        }
        for link in feed.navigation ?? [] {
            let entry = XMLElement(name: "entry")
            entry.addChild(text("title", link.title ?? link.href))
            entry.addChild(text("id", link.href))
            entry.addChild(text("updated", updated))
            entry.addChild(text("content", link.title ?? "", attributes: ["type": "text"]))
            entry.addChild(self.link(rel: "subsection", href: link.href, type: acquisitionType))
            root.addChild(entry)
        }
        for publication in feed.publications ?? [] {
            root.addChild(entry(publication, updated: updated))
        }
        return serialized(root)
    }

    /// One publication as an OPDS 1.2 entry document.
    static func entryDocument(_ publication: OPDSFeeds.Publication, updated: String) -> Data {
        let element = entry(publication, updated: updated)
        for (prefix, uri) in [("", atom), ("opds", opds), ("dc", dcterms)] {
            if let namespace = XMLNode.namespace(withName: prefix, stringValue: uri) as? XMLNode { element.addNamespace(namespace) }
        }
        return serialized(element)
    }

    /// The OpenSearch 1.1 description of the 1.2 search, which 1.x apps fetch to learn where to search.
    static func openSearchDescription(base: String, root: String, storeTitle: String) -> Data {
        let description = XMLElement(name: "OpenSearchDescription", uri: openSearchNamespace)
        if let namespace = XMLNode.namespace(withName: "", stringValue: openSearchNamespace) as? XMLNode { description.addNamespace(namespace) }
        description.addChild(XMLElement(name: "ShortName", stringValue: xmlText(String(storeTitle.prefix(16)))))
        description.addChild(XMLElement(name: "Description", stringValue: "Search \(storeTitle) by title, author, subject or summary"))
        description.addChild(XMLElement(name: "InputEncoding", stringValue: "UTF-8"))
        description.addChild(XMLElement(name: "OutputEncoding", stringValue: "UTF-8"))
        let url = XMLElement(name: "Url")
        description.addChild(add([(key: "type", value: acquisitionType), (key: "template", value: base + root + "/search?query={searchTerms}")], to: url))
        return serialized(description)
    }

    /// The feeds' `updated`: the newest publication date in the catalog, at midnight UTC (a
    /// catalog without dates says the epoch), so the same catalog always writes the same bytes.
    static func updated(_ products: [Product]) -> String {
        (products.compactMap(\.publicationDate).max() ?? "1970-01-01") + "T00:00:00Z"
    }

    // MARK: Parts

    private static func entry(_ publication: OPDSFeeds.Publication, updated: String) -> XMLElement {
        let metadata = publication.metadata
        let entry = XMLElement(name: "entry")
        entry.addChild(text("title", metadata.title))
        entry.addChild(text("id", metadata.identifier))
        entry.addChild(text("updated", metadata.published.map { $0 + "T00:00:00Z" } ?? updated))
        for author in metadata.author ?? [] { entry.addChild(person("author", author.name)) }
        // Atom has one contributor element, without a role (OPDS 1.2 allows no attribute of its own there).
        for people in [metadata.editor, metadata.illustrator, metadata.translator, metadata.narrator] {
            for person in people ?? [] { entry.addChild(self.person("contributor", person.name)) }
        }
        if let language = metadata.language { entry.addChild(text("dc:language", language)) }
        for publisher in metadata.publisher ?? [] { entry.addChild(text("dc:publisher", publisher.name)) }
        if let published = metadata.published { entry.addChild(text("dc:issued", published)) }
        if metadata.identifier.hasPrefix("urn:") { entry.addChild(text("dc:identifier", metadata.identifier)) }
        for subject in metadata.subject ?? [] { entry.addChild(element("category", attributes: ["term": subject, "label": subject])) }
        if let description = metadata.description { entry.addChild(text("summary", description, attributes: ["type": "text"])) }
        for image in publication.images ?? [] {
            entry.addChild(link(rel: "http://opds-spec.org/image", href: image.href, type: image.type))
            entry.addChild(link(rel: "http://opds-spec.org/image/thumbnail", href: image.href, type: image.type))
        }
        for link in publication.links {
            switch link.rel {
            case "self":
                entry.addChild(self.link(rel: "alternate", href: link.href, type: entryType))
            case let rel? where rel.hasPrefix("http://opds-spec.org/acquisition"):
                let acquisition = self.link(rel: rel, href: link.href, type: link.type, title: link.title)
                if let price = link.properties?.price {
                    acquisition.addChild(text("opds:price", price.amount, attributes: ["currencycode": price.currency]))
                }
                // Nested as 2.0's: what the link leads to, then what that holds.
                for indirect in link.properties?.indirectAcquisition ?? [] {
                    acquisition.addChild(element("opds:indirectAcquisition", attributes: ["type": indirect.type]))
                }
                entry.addChild(acquisition)
            default:
                entry.addChild(self.link(rel: link.rel, href: link.href, type: link.type, title: link.title))
            }
        }
        return entry
    }

    /// A 2.0 link's type as 1.2 names it: a feed's JSON type becomes the Atom kind it leads to.
    private static func feedType(of link: OPDSFeeds.Link, kind: Kind) -> String? {
        guard link.type == OPDSFeeds.feedType, link.rel != "alternate" else { return link.type }
        switch link.rel {
        case "start": return navigationType
        case "self": return kind.type
        default: return acquisitionType
        }
    }

    private static func link(rel: String?, href: String, type: String?, title: String? = nil) -> XMLElement {
        let attributes = [("rel", rel), ("href", href), ("type", type), ("title", title)].compactMap { name, value in value.map { (key: name, value: $0) } }
        return add(attributes, to: XMLElement(name: "link"))
    }

    private static func person(_ name: String, _ fullName: String) -> XMLElement {
        let person = XMLElement(name: name)
        person.addChild(text("name", fullName))
        return person
    }

    /// Attributes are pairs, in order: a dictionary's order changes from one process to the next,
    /// and with it a feed's bytes and ETag.
    private static func text(_ name: String, _ value: String, attributes: KeyValuePairs<String, String> = [:]) -> XMLElement {
        add(attributes, to: XMLElement(name: name, stringValue: xmlText(value)))
    }

    /// `text` with what XML 1.0 cannot hold left out (C0 controls but tab and line breaks, the
    /// noncharacters U+FFFE and U+FFFF): a search's words or a subject in a path reach a feed, and
    /// one such character made the whole document unreadable to every app (libxml2 writes it as is).
    static func xmlText(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { scalar in
            switch scalar.value {
            case 0x09, 0x0A, 0x0D: true
            case 0x00...0x1F, 0xFFFE, 0xFFFF: false
            default: true
            }
        }))
    }

    private static func element(_ name: String, attributes: KeyValuePairs<String, String>) -> XMLElement {
        add(attributes, to: XMLElement(name: name))
    }

    private static func add(_ attributes: some Sequence<(key: String, value: String)>, to element: XMLElement) -> XMLElement {
        for (name, value) in attributes {
            if let attribute = XMLNode.attribute(withName: name, stringValue: xmlText(value)) as? XMLNode { element.addAttribute(attribute) }
        }
        return element
    }

    private static func serialized(_ root: XMLElement) -> Data {
        let document = XMLDocument(rootElement: root)
        document.version = "1.0"
        document.characterEncoding = "UTF-8"
        return document.xmlData(options: [.nodeCompactEmptyElement])
    }
}
