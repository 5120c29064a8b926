import Foundation

/// What a store shows of a publication besides its title and price (issue 47): who made it, in
/// which language, its ISBN or ISSN, its subjects, its description, its length. From the catalog
/// file's fields; for an EPUB, what the catalog leaves out is read from its package document's
/// Dublin Core (``EPUBPackageMetadata``), the catalog winning where both say something.
public struct PublicationMetadata: Codable, Sendable, Equatable {
    /// A person and what they did.
    public struct Contributor: Codable, Sendable, Equatable {
        public var name: String
        /// `author`, `editor`, `illustrator`, `translator` or `narrator`.
        public var role: String

        public init(name: String, role: String) {
            self.name = name
            self.role = role
        }
    }

    /// The roles a contributor may have, as OPDS and schema.org name them.
    public static let roles: Set<String> = ["author", "editor", "illustrator", "translator", "narrator"]

    public var contributors: [Contributor]?
    public var publisher: String?
    /// A BCP 47 language tag (`en`, `fr-CA`).
    public var language: String?
    /// `urn:isbn:<13 digits>` or `urn:issn:<NNNN-NNNC>`.
    public var identifiers: [String]?
    public var subjects: [String]?
    /// Longer than the product's one-line summary.
    public var description: String?
    public var pageCount: Int?

    public init(contributors: [Contributor]? = nil, publisher: String? = nil, language: String? = nil, identifiers: [String]? = nil,
                subjects: [String]? = nil, description: String? = nil, pageCount: Int? = nil) {
        self.contributors = contributors
        self.publisher = publisher
        self.language = language
        self.identifiers = identifiers
        self.subjects = subjects
        self.description = description
        self.pageCount = pageCount
    }

    /// Nothing is said.
    public var isEmpty: Bool { self == PublicationMetadata() }

    /// The authors' names, as a list shows them.
    public var authors: [String] { (contributors ?? []).filter { $0.role == "author" }.map(\.name) }

    /// This metadata with what `other` says where this says nothing (the catalog over the EPUB's).
    public func filled(from other: PublicationMetadata) -> PublicationMetadata {
        PublicationMetadata(
            contributors: contributors ?? other.contributors, publisher: publisher ?? other.publisher, language: language ?? other.language,
            identifiers: identifiers ?? other.identifiers, subjects: subjects ?? other.subjects, description: description ?? other.description,
            pageCount: pageCount ?? other.pageCount)
    }

    // MARK: Identifiers

    /// An ISBN-13 (hyphens and spaces allowed) whose check digit is right, as `urn:isbn:<13 digits>`.
    public static func isbn(_ text: String) -> String? {
        let digits = text.filter { $0 != "-" && $0 != " " }
        guard digits.count == 13, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
              digits.hasPrefix("978") || digits.hasPrefix("979") else { return nil }
        let values = digits.compactMap(\.wholeNumberValue)
        let sum = values.prefix(12).enumerated().reduce(0) { $0 + $1.element * ($1.offset % 2 == 0 ? 1 : 3) }
        guard (10 - sum % 10) % 10 == values[12] else { return nil }
        return "urn:isbn:\(digits)"
    }

    /// An ISSN (`NNNN-NNNC`, C a digit or X) whose check character is right, as `urn:issn:NNNN-NNNC`.
    public static func issn(_ text: String) -> String? {
        let compact = text.uppercased().filter { $0 != "-" && $0 != " " }
        guard compact.count == 8, compact.allSatisfy(\.isASCII) else { return nil }
        let characters = Array(compact)
        let digits = characters.prefix(7).compactMap(\.wholeNumberValue)
        guard digits.count == 7 else { return nil }
        let sum = digits.enumerated().reduce(0) { $0 + $1.element * (8 - $1.offset) }
        let check = (11 - sum % 11) % 11
        let expected: Character = check == 10 ? "X" : Character(String(check))
        guard characters[7] == expected else { return nil }
        return "urn:issn:\(String(characters.prefix(4)))-\(String(characters.suffix(4)))"
    }

    /// A BCP 47 tag as far as a catalog needs: a 2–3 letter language, then subtags of 1–8 letters or digits.
    public static func isLanguageTag(_ text: String) -> Bool {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard let first = parts.first, (2...3).contains(first.count), first.allSatisfy({ $0.isASCII && $0.isLetter }) else { return false }
        return parts.dropFirst().allSatisfy { part in (1...8).contains(part.count) && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
    }
}
