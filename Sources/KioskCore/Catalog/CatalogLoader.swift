import Crypto
import Foundation

/// Reads the human-edited master list (`Catalog/*.json`) and validates every product.
///
/// Each catalog file is `{"products": [ … ]}`. The loader reads fields one by one rather than
/// through `Codable`, so that every refusal can name the file, the product and the field.
public struct CatalogLoader: Sendable {
    public var catalogDirectory: URL
    public var contentDirectory: URL

    public init(catalogDirectory: URL, contentDirectory: URL) {
        self.catalogDirectory = catalogDirectory
        self.contentDirectory = contentDirectory
    }

    /// Loads and validates every catalog file.
    /// - Throws: ``CatalogError`` for the first problem found.
    public func load() throws -> [CatalogEntry] {
        let files = try catalogFiles()
        guard !files.isEmpty else {
            throw CatalogError(
                .emptyCatalog, file: catalogDirectory.path,
                message: "holds no .json catalog file; add one with {\"products\": [...]}")
        }

        var entries: [CatalogEntry] = []
        var fileOfID: [String: String] = [:]
        var productOfAppStoreID: [String: String] = [:]
        var productOfPlayID: [String: String] = [:]
        for file in files {
            for entry in try loadFile(file) {
                if let first = fileOfID[entry.product.id] {
                    throw CatalogError(
                        .duplicateID, file: entry.file, productID: entry.product.id, field: "id",
                        message: "is already used by a product in \(first); product IDs must be unique")
                }
                fileOfID[entry.product.id] = entry.file
                // An App Store transaction, and a Play purchase, must each name one product only.
                try Self.claim(entry.product.appStoreProductId, of: entry, in: &productOfAppStoreID, field: "appStoreProductId", channel: "App Store")
                try Self.claim(entry.product.playProductId, of: entry, in: &productOfPlayID, field: "playProductId", channel: "Play")
                entries.append(entry)
            }
        }
        try checkSeries(entries)
        return entries.sorted { $0.product.id < $1.product.id }
    }

    /// A SHA-256 of everything ``load()`` reads: both folders' paths and each catalog file's name
    /// and bytes. Equal digests load to equal entries (the content itself is the content store's
    /// to fingerprint).
    public func digest() throws -> String {
        var hasher = SHA256()
        for path in [catalogDirectory.standardizedFileURL.path, contentDirectory.standardizedFileURL.path] {
            hasher.update(data: Data(path.utf8 + [0]))
        }
        for file in try catalogFiles() {
            let bytes = try Data(contentsOf: file)
            hasher.update(data: Data(file.lastPathComponent.utf8 + [0]))
            hasher.update(data: withUnsafeBytes(of: Int64(bytes.count).littleEndian) { Data($0) })
            hasher.update(data: bytes)
        }
        return FileDigest.hex(hasher.finalize())
    }

    /// Records that `channelId` (a store channel's product ID) names `entry`'s product.
    /// - Throws: ``CatalogError`` when it already names another: a channel's purchase must map to one Kiosk product.
    private static func claim(_ channelId: String?, of entry: CatalogEntry, in seen: inout [String: String], field: String, channel: String) throws {
        guard let channelId else { return }
        if let other = seen[channelId] {
            throw CatalogError(
                .duplicateID, file: entry.file, productID: entry.product.id, field: field,
                message: "\"\(channelId)\" is already the \(channel) ID of \(other); each \(channel) product maps to one Kiosk product")
        }
        seen[channelId] = entry.product.id
    }

    /// Where JSONSerialization stopped, as a person finds it in an editor: " at line 3, column 14
    /// (invalid value)". Foundation says only "around character N" (a byte offset), in its debug
    /// description; without one, nothing is added.
    static func place(of error: any Error, in data: Data) -> String {
        let detail = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? ""
        guard let range = detail.range(of: #"character [0-9]+"#, options: .regularExpression),
              let offset = Int(detail[range].dropFirst("character ".count)), offset <= data.count else { return "" }
        var line = 1
        var lineStart = 0
        for (index, byte) in data.prefix(offset).enumerated() where byte == UInt8(ascii: "\n") {
            line += 1
            lineStart = index + 1
        }
        // Columns count characters, not bytes, so a line with accents points at the right place.
        let column = String(decoding: data[lineStart..<offset], as: UTF8.self).count + 1
        let reason = detail[..<range.lowerBound].trimmingCharacters(in: .whitespaces)
            .replacingOccurrences(of: " around", with: "").lowercased()
        return " at line \(line), column \(column)" + (reason.isEmpty ? "" : " (\(reason))")
    }

    /// The catalog's `.json` files, by name.
    private func catalogFiles() throws -> [URL] {
        do {
            return try FileManager.default.contentsOfDirectory(at: catalogDirectory, includingPropertiesForKeys: nil)
                .filter { $0.pathExtension == "json" }
                .sorted { $0.lastPathComponent < $1.lastPathComponent }
        } catch {
            throw CatalogError(
                .unreadableFile, file: catalogDirectory.path,
                message: "cannot read the catalog folder; check the --catalog path")
        }
    }

    private func loadFile(_ url: URL) throws -> [CatalogEntry] {
        let name = displayName(url)
        let json: Any
        var data = Data()
        do {
            data = try Data(contentsOf: url)
            json = try JSONSerialization.jsonObject(with: data)
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile || error.code == .fileReadNoPermission {
            throw CatalogError(.unreadableFile, file: name, message: "cannot be read")
        } catch {
            throw CatalogError(.malformedJSON, file: name, message: "is not valid JSON\(Self.place(of: error, in: data)); fix it and reload")
        }
        guard let root = json as? [String: Any], let list = root["products"] as? [Any] else {
            throw CatalogError(.malformedJSON, file: name, message: "must be an object with a \"products\" array")
        }
        return try list.enumerated().map { index, item in
            guard let object = item as? [String: Any] else {
                throw CatalogError(.wrongType, file: name, productID: "#\(index + 1)", message: "must be a JSON object")
            }
            return try entry(from: FieldReader(object: object, file: name, index: index))
        }
    }

    private func entry(from reader: FieldReader) throws -> CatalogEntry {
        var reader = reader
        let id = try reader.string("id")
        reader.productID = id
        guard ProductID.isValid(id) else {
            throw reader.error(.badID, "id", ProductID.problem(id))
        }
        let kindName = try reader.string("kind")
        guard let kind = ProductKind(rawValue: kindName) else {
            let known = ProductKind.allCases.map(\.rawValue).joined(separator: ", ")
            throw reader.error(.unknownKind, "kind", "\"\(kindName)\" is not a product kind; use one of \(known)")
        }
        let title = try reader.string("title")
        guard !title.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw reader.error(.missingField, "title", "must not be empty")
        }
        let summary = try reader.optionalString("summary") ?? ""
        let (amount, currency, cents) = try Self.price(reader)
        var product = Product(
            id: id, kind: kind, title: title, summary: summary,
            price: Price(amount: amount, currency: currency))
        product.creditPrice = try reader.positiveInt("creditPrice", atMost: Price.maxCredits)
        product.credits = try reader.positiveInt("credits", atMost: Price.maxCredits)
        product.series = try reader.optionalString("series")
        product.issueNumber = try reader.positiveInt("issueNumber")
        product.periodMonths = try reader.positiveInt("periodMonths")
        product.gracePeriodDays = try reader.positiveInt("gracePeriodDays", atMost: 60)
        if let date = try reader.optionalString("publicationDate") {
            guard Self.isCalendarDate(date) else {
                throw reader.error(.badDate, "publicationDate", "\"\(date)\" is not a date like 2026-09-01")
            }
            product.publicationDate = date
        }
        product.subscriptionGroup = try reader.optionalString("subscriptionGroup")
        product.planLevel = try reader.positiveInt("planLevel", atMost: 100)
        product.prices = try Self.storefrontPrices(reader)
        if let category = try reader.optionalString("taxCategory") {
            guard let known = TaxCategory(rawValue: category) else {
                throw reader.error(.badPrice, "taxCategory", "\"\(category)\" is not a tax category; use one of \(TaxCategory.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            product.taxCategory = known
        }
        product.introductoryOffer = try Self.introductoryOffer(reader, normal: cents, currency: currency, periodMonths: product.periodMonths ?? 1)
        product.appStoreProductId = try reader.optionalString("appStoreProductId")
        product.playProductId = try reader.optionalString("playProductId")
        let metadata = try Self.metadata(reader)
        product.metadata = metadata.isEmpty ? nil : metadata
        // Only `false` is written out: on sale is the default, and the catalog's ETag stays.
        product.forSale = try reader.optionalBool("forSale") == false ? false : nil
        let content = try contentSource(reader)
        let cover = try coverFile(reader)
        try reader.rejectUnknownFields()
        try checkKind(product, content: content, reader: reader)
        return CatalogEntry(product: product, content: content, file: reader.file, cover: cover)
    }

    /// The publication's metadata fields: `author` (a name or a list), `contributors` (objects of a
    /// `name` and a `role`), `publisher`, `language` (BCP 47), `isbn` (ISBN-13, check digit
    /// validated), `issn` (check character validated), `subjects`, `description`, `pageCount`.
    private static func metadata(_ reader: FieldReader) throws -> PublicationMetadata {
        var metadata = PublicationMetadata()
        var contributors = (try reader.optionalStrings("author", limit: 20) ?? []).map { PublicationMetadata.Contributor(name: $0, role: "author") }
        if let raw = reader.object["contributors"], !(raw is NSNull) {
            guard let list = raw as? [[String: Any]], list.count <= 50 else {
                throw reader.error(.wrongType, "contributors", "must be a list of at most 50 objects with a \"name\" and a \"role\"")
            }
            for entry in list {
                guard let name = entry["name"] as? String, !name.trimmingCharacters(in: .whitespaces).isEmpty, let role = entry["role"] as? String,
                      entry.keys.allSatisfy({ $0 == "name" || $0 == "role" }) else {
                    throw reader.error(.badMetadata, "contributors", "each contributor is an object with a \"name\" and a \"role\", and nothing else")
                }
                guard PublicationMetadata.roles.contains(role) else {
                    throw reader.error(.badMetadata, "contributors", "\"\(role)\" is not a role; use one of \(PublicationMetadata.roles.sorted().joined(separator: ", "))")
                }
                try reader.refuseHidden(name, "contributors")
                contributors.append(PublicationMetadata.Contributor(name: name, role: role))
            }
        }
        metadata.contributors = contributors.isEmpty ? nil : contributors
        metadata.publisher = try reader.optionalString("publisher")
        if let language = try reader.optionalString("language") {
            guard PublicationMetadata.isLanguageTag(language) else {
                throw reader.error(.badMetadata, "language", "\"\(language)\" is not a BCP 47 language tag like en or fr-CA")
            }
            metadata.language = language
        }
        var identifiers: [String] = []
        if let isbn = try reader.optionalString("isbn") {
            guard let urn = PublicationMetadata.isbn(isbn) else {
                throw reader.error(.badMetadata, "isbn", "\"\(isbn)\" is not an ISBN-13 whose check digit is right")
            }
            identifiers.append(urn)
        }
        if let issn = try reader.optionalString("issn") {
            guard let urn = PublicationMetadata.issn(issn) else {
                throw reader.error(.badMetadata, "issn", "\"\(issn)\" is not an ISSN (NNNN-NNNC) whose check character is right")
            }
            identifiers.append(urn)
        }
        metadata.identifiers = identifiers.isEmpty ? nil : identifiers
        metadata.subjects = try reader.optionalStrings("subjects")
        metadata.description = try reader.optionalString("description")
        metadata.pageCount = try reader.positiveInt("pageCount", atMost: 100_000)
        return metadata
    }

    /// `cover`: an image file inside the content folder (checked to be an image, and small
    /// enough, when the catalog is published).
    private func coverFile(_ reader: FieldReader) throws -> URL? {
        guard let path = try reader.optionalString("cover") else { return nil }
        let location = try insideContent(path, reader: reader, field: "cover")
        var isDirectory: ObjCBool = false
        var info = stat()
        guard FileManager.default.fileExists(atPath: location.path, isDirectory: &isDirectory), !isDirectory.boolValue,
              lstat(location.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw reader.error(.missingContent, "cover", "\(location.path) is not a regular file; add the cover image or fix the path")
        }
        return location
    }

    /// `path` under the content folder, refused when it leaves it (`..`, absolute, or through a link).
    private func insideContent(_ path: String, reader: FieldReader, field: String) throws -> URL {
        guard !path.hasPrefix("/"), !path.split(separator: "/").contains("..") else {
            throw reader.error(.badContent, field, "\"\(path)\" must be a relative path inside the content folder")
        }
        var walked = contentDirectory
        for component in path.split(separator: "/") where component != "." {
            walked = walked.appendingPathComponent(String(component))
            var info = stat()
            if lstat(walked.path, &info) == 0, info.st_mode & S_IFMT == S_IFLNK {
                throw reader.error(.badContent, field, "\(walked.path) is a symbolic link; content must be a real folder or file inside the content folder")
            }
        }
        return contentDirectory.appendingPathComponent(path)
    }

    /// A price and its currency (`price`, `currency` of `reader`'s object): a decimal amount no
    /// larger than the largest price, an ISO 4217 code, no fraction where the currency has none.
    private static func price(_ reader: FieldReader) throws -> (amount: String, currency: String, cents: Int) {
        let amount = try reader.string("price")
        guard Self.isDecimalAmount(amount) else {
            throw reader.error(.badPrice, "price", "\"\(amount)\" is not a decimal amount like 4.99")
        }
        guard let cents = Price.cents(amount), cents <= Price.maxCents else {
            throw reader.error(.badPrice, "price", "\"\(amount)\" is more than the largest price, \(Price.maxCents / 100).00")
        }
        let currency = try reader.string("currency")
        guard currency.utf8.count == 3, currency.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) else {
            throw reader.error(.badPrice, "currency", "\"\(currency)\" is not an ISO 4217 code like USD")
        }
        guard !Price.wholeUnitCurrencies.contains(currency) || cents % 100 == 0 else {
            throw reader.error(.badPrice, "price", "\"\(amount)\" has a fraction, and \(currency) has no minor unit; give a whole amount")
        }
        return (amount, currency, cents)
    }

    /// `prices`: `{"DE": {"price": "2.99", "currency": "EUR"}, …}`, one entry per storefront
    /// (ISO 3166-1 alpha-2) the product is sold in.
    private static func storefrontPrices(_ reader: FieldReader) throws -> [String: Price]? {
        guard let object = try reader.optionalObject("prices") else { return nil }
        guard !object.isEmpty else { throw reader.error(.badPrice, "prices", "lists no storefront; leave it out to sell everywhere at price") }
        var prices: [String: Price] = [:]
        for (code, value) in object {
            guard StorefrontCountry.code(code) == code else {
                throw reader.error(.badPrice, "prices", "\"\(code)\" is not a country code like DE (ISO 3166-1 alpha-2, upper case)")
            }
            guard let entry = value as? [String: Any] else {
                throw reader.error(.badPrice, "prices.\(code)", "must be {\"price\": \"2.99\", \"currency\": \"EUR\"}")
            }
            var inner = FieldReader(object: entry, file: reader.file, index: reader.index, prefix: "prices.\(code).")
            inner.productID = reader.productID
            let (amount, currency, _) = try Self.price(inner)
            try inner.rejectUnknownFields()
            prices[code] = Price(amount: amount, currency: currency)
        }
        return prices
    }

    /// A subscription's `introductoryOffer` (``IntroductoryOffer``): a free trial of 1 to 365 days
    /// or 1 to 24 periods, or a price (below the normal one) for 1 to 24 periods.
    private static func introductoryOffer(_ reader: FieldReader, normal: Int, currency: String, periodMonths: Int) throws -> IntroductoryOffer? {
        guard let object = try reader.optionalObject("introductoryOffer") else { return nil }
        var inner = FieldReader(object: object, file: reader.file, index: reader.index, prefix: "introductoryOffer.")
        inner.productID = reader.productID
        let typeName = try inner.string("type")
        guard let type = IntroductoryOffer.Kind(rawValue: typeName) else {
            let known = IntroductoryOffer.Kind.allCases.map(\.rawValue).joined(separator: ", ")
            throw inner.error(.badOffer, "type", "\"\(typeName)\" is not an offer type; use one of \(known)")
        }
        let offer = IntroductoryOffer(type: type, days: try inner.positiveInt("days", atMost: IntroductoryOffer.maxDays),
                                      periods: try inner.positiveInt("periods", atMost: IntroductoryOffer.maxPeriods), price: try inner.optionalString("price"))
        try inner.rejectUnknownFields()
        switch type {
        case .freeTrial:
            guard (offer.days == nil) != (offer.periods == nil) else {
                throw inner.error(.badOffer, "days", "a free trial lasts either \"days\" or \"periods\"; give one of them")
            }
            if offer.price != nil { throw inner.error(.badOffer, "price", "a free trial has no price; leave it out") }
            // As the app stores have it: a trial lasts at most a year.
            if let periods = offer.periods, periods * periodMonths > 12 {
                throw inner.error(.badOffer, "periods", "a free trial lasts at most a year; \(periods) periods of \(periodMonths) months is more")
            }
        case .payAsYouGo, .payUpFront:
            if offer.days != nil { throw inner.error(.badOffer, "days", "\(type.rawValue) lasts whole periods; give \"periods\", not \"days\"") }
            guard offer.periods != nil else { throw inner.error(.missingField, "periods", "how many periods the offer's price lasts is required") }
            guard let amount = offer.price else { throw inner.error(.missingField, "price", "the offer's price is required") }
            guard isDecimalAmount(amount), let cents = Price.cents(amount), cents > 0 else {
                throw inner.error(.badOffer, "price", "\"\(amount)\" is not a decimal amount above zero like 0.99 (a free start is a freeTrial)")
            }
            guard !Price.wholeUnitCurrencies.contains(currency) || cents % 100 == 0 else {
                throw inner.error(.badOffer, "price", "\"\(amount)\" has a fraction, and \(currency) has no minor unit; give a whole amount")
            }
            let full = type == .payAsYouGo ? normal : normal * (offer.periods ?? 1)
            guard cents < full else {
                throw inner.error(.badOffer, "price", "\"\(amount)\" is no lower than the normal price for the same time (\(Price.shown(cents: full, currency))); an offer costs less")
            }
        }
        return offer
    }

    private func contentSource(_ reader: FieldReader) throws -> ContentSource? {
        guard let object = try reader.optionalObject("content") else { return nil }
        var inner = FieldReader(object: object, file: reader.file, index: reader.index, prefix: "content.")
        inner.productID = reader.productID
        let path = try inner.string("path")
        let formatName = try inner.string("format")
        try inner.rejectUnknownFields()
        guard let format = ArchiveFormat(rawValue: formatName) else {
            let known = ArchiveFormat.allCases.map(\.rawValue).joined(separator: ", ")
            throw inner.error(.badContent, "format", "\"\(formatName)\" is not a supported format; use one of \(known)")
        }
        // Content is what lies in the content folder: a link would pack or serve whatever it points
        // at (a file of the server's, or bytes that change under an archive's published SHA-256).
        let location = try insideContent(path, reader: inner, field: "path")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: location.path, isDirectory: &isDirectory) else {
            throw inner.error(.missingContent, "path", "\(location.path) does not exist; add the content or fix the path")
        }
        // A pipe or a device would block every start and reload that reads it.
        var info = stat()
        guard lstat(location.path, &info) == 0, [S_IFREG, S_IFDIR].contains(info.st_mode & S_IFMT) else {
            throw inner.error(.badContent, "path", "\(location.path) is not a regular file or folder; content must be one")
        }
        if isDirectory.boolValue, format.deliveredAsFile {
            throw inner.error(.badContent, "format", "\(format.rawValue) is delivered as the publisher's own file, not packed from a folder; give the .\(format.fileExtension) file's path")
        }
        if format.deliveredAsFile, !PublicationFileName.isSafe(location.lastPathComponent) {
            throw inner.error(.badContent, "path", "\(ProductID.printable(location.lastPathComponent)) cannot be a file name in a reader's library (1 to 200 bytes, no control characters, not hidden); rename the file")
        }
        return ContentSource(location: location, isFolder: isDirectory.boolValue, format: format)
    }

    private func checkKind(_ product: Product, content: ContentSource?, reader: FieldReader) throws {
        switch product.kind {
        case .consumable:
            guard product.credits != nil else {
                throw reader.error(.missingField, "credits", "a consumable must say how many credits it adds")
            }
            for (field, value) in [("content", content as Any?), ("series", product.series), ("creditPrice", product.creditPrice), ("gracePeriodDays", product.gracePeriodDays),
                                   ("subscriptionGroup", product.subscriptionGroup), ("introductoryOffer", product.introductoryOffer),
                                   ("planLevel", product.planLevel)] where value != nil {
                throw reader.error(.kindMismatch, field, "is not allowed on a consumable")
            }
        case .nonConsumable:
            guard content != nil else {
                throw reader.error(.missingField, "content", "a book or an issue needs its content {path, format}")
            }
            if product.series != nil {
                guard product.issueNumber != nil else {
                    throw reader.error(.missingField, "issueNumber", "an issue of a series needs its number")
                }
                guard product.publicationDate != nil else {
                    throw reader.error(.missingField, "publicationDate", "an issue of a series needs its publication date")
                }
            }
            for (field, value) in [("credits", product.credits as Any?), ("periodMonths", product.periodMonths), ("gracePeriodDays", product.gracePeriodDays),
                                   ("subscriptionGroup", product.subscriptionGroup), ("introductoryOffer", product.introductoryOffer),
                                   ("planLevel", product.planLevel)] where value != nil {
                throw reader.error(.kindMismatch, field, "is not allowed on a non-consumable")
            }
        case .subscription:
            guard product.series != nil else {
                throw reader.error(.missingField, "series", "a subscription must name the series it covers")
            }
            guard product.periodMonths != nil else {
                throw reader.error(.missingField, "periodMonths", "a subscription must say how many months a period lasts")
            }
            for (field, value) in [("content", content as Any?), ("credits", product.credits), ("creditPrice", product.creditPrice)] where value != nil {
                throw reader.error(.kindMismatch, field, "is not allowed on a subscription")
            }
        }
    }

    private func checkSeries(_ entries: [CatalogEntry]) throws {
        let seriesWithIssues = Set(entries.filter { $0.product.kind == .nonConsumable }.compactMap(\.product.series))
        for entry in entries where entry.product.kind == .subscription {
            guard let series = entry.product.series, seriesWithIssues.contains(series) else {
                throw CatalogError(
                    .unknownSeries, file: entry.file, productID: entry.product.id, field: "series",
                    message: "\"\(entry.product.series ?? "")\" has no issue in the catalog; add an issue with this series")
            }
        }
    }

    private func displayName(_ url: URL) -> String {
        catalogDirectory.lastPathComponent + "/" + url.lastPathComponent
    }

    // The shapes below are checked byte by byte: a regular expression per field made Foundation
    // build (and cache-key by printing) an NSRegularExpression for every product, a quarter of
    // the time a 100,000-product catalog took to load.

    /// True for `0`, or digits not starting with 0, then optionally `.` and one or two digits.
    static func isDecimalAmount(_ text: String) -> Bool {
        let parts = text.utf8.split(separator: UInt8(ascii: "."), maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(isDigit),
              whole.count == 1 || whole.first != UInt8(ascii: "0") else { return false }
        guard parts.count == 2 else { return true }
        return (1...2).contains(parts[1].count) && parts[1].allSatisfy(isDigit)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// True for a real calendar date written `yyyy-MM-dd`.
    public static func isCalendarDate(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        let dashes = [4, 7]
        guard bytes.count == 10, bytes.indices.allSatisfy({ dashes.contains($0) ? bytes[$0] == UInt8(ascii: "-") : isDigit(bytes[$0]) })
        else { return false }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        guard let date = formatter.date(from: text) else { return false }
        return formatter.string(from: date) == text
    }
}

/// Reads typed fields of one catalog object, remembering which ones were read.
private struct FieldReader {
    let object: [String: Any]
    let file: String
    let index: Int
    var prefix = ""
    var productID: String?

    init(object: [String: Any], file: String, index: Int, prefix: String = "") {
        self.object = object
        self.file = file
        self.index = index
        self.prefix = prefix
    }

    static let knownFields: [String: Set<String>] = [
        "": ["id", "kind", "title", "summary", "price", "currency", "creditPrice", "credits", "series",
             "issueNumber", "publicationDate", "periodMonths", "gracePeriodDays", "content", "appStoreProductId", "playProductId", "forSale",
             "subscriptionGroup", "introductoryOffer", "planLevel", "prices", "taxCategory",
             "author", "contributors", "publisher", "language", "isbn", "issn", "subjects", "description", "pageCount", "cover"],
        "content.": ["path", "format"],
        "introductoryOffer.": ["type", "days", "periods", "price"],
        "prices.": ["price", "currency"],
    ]

    func error(_ rule: CatalogError.Rule, _ field: String, _ message: String) -> CatalogError {
        CatalogError(rule, file: file, productID: productID ?? "#\(index + 1)", field: prefix + field, message: message)
    }

    func string(_ field: String) throws -> String {
        guard let value = try optionalString(field) else {
            throw error(.missingField, field, "is required")
        }
        return value
    }

    func optionalBool(_ field: String) throws -> Bool? {
        guard let raw = object[field], !(raw is NSNull) else { return nil }
        // A boolean's NSNumber has the type code "c"; a number (0, 1) is not a boolean here.
        guard let number = raw as? NSNumber, String(cString: number.objCType) == "c" else {
            throw error(.wrongType, field, "must be true or false")
        }
        return number.boolValue
    }

    func optionalString(_ field: String) throws -> String? {
        guard let raw = object[field], !(raw is NSNull) else { return nil }
        guard let value = raw as? String else {
            throw error(.wrongType, field, "must be a string")
        }
        try refuseHidden(value, field)
        return value
    }

    /// A catalog's text reaches pages, feeds, Stripe's checkout and terminals, where a NUL, another
    /// control character or a bidirectional override or isolate is unseen and can hide or turn
    /// around what follows it (a title reversing the price after it). Refused by name here, once,
    /// rather than dropped differently by each place that shows the text. Tabs and line breaks stay;
    /// so do the marks U+200E/U+200F that right-to-left text uses. Noncharacters are refused too.
    func refuseHidden(_ value: String, _ field: String) throws {
        guard let hidden = value.unicodeScalars.first(where: Self.isHidden) else { return }
        throw error(.badMetadata, field, "holds \(String(format: "U+%04X", hidden.value)), a control character no reader sees (it can hide or reorder the text after it); remove it")
    }

    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x0A, 0x0D: false
        case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: true
        // Noncharacters (U+FDD0–U+FDEF, and the last two of every plane): no text holds them, and
        // XML cannot, so one made every OPDS 1.2 feed unreadable.
        case 0xFDD0...0xFDEF: true
        default: scalar.value & 0xFFFE == 0xFFFE
        }
    }

    /// A string, or a list of strings (each non-empty, at most `limit` of them).
    func optionalStrings(_ field: String, limit: Int = 100) throws -> [String]? {
        guard let raw = object[field], !(raw is NSNull) else { return nil }
        let values: [String]
        if let one = raw as? String {
            values = [one]
        } else if let many = raw as? [Any], many.allSatisfy({ $0 is String }) {
            values = many.compactMap { $0 as? String }
        } else {
            throw error(.wrongType, field, "must be a string or a list of strings")
        }
        guard values.count <= limit, values.allSatisfy({ !$0.trimmingCharacters(in: .whitespaces).isEmpty }) else {
            throw error(.badMetadata, field, "must hold 1 to \(limit) non-empty strings")
        }
        for value in values { try refuseHidden(value, field) }
        return values
    }

    func optionalObject(_ field: String) throws -> [String: Any]? {
        guard let raw = object[field], !(raw is NSNull) else { return nil }
        guard let value = raw as? [String: Any] else {
            throw error(.wrongType, field, "must be an object")
        }
        return value
    }

    /// A whole number above zero and at most `limit`, so no sum of them can overflow.
    func positiveInt(_ field: String, atMost limit: Int = 1_000_000) throws -> Int? {
        guard let raw = object[field], !(raw is NSNull) else { return nil }
        // JSONSerialization gives NSNumber for booleans and numbers alike; its type code tells them apart.
        guard let number = raw as? NSNumber, String(cString: number.objCType) != "c",
              number.doubleValue == Double(number.intValue)
        else {
            throw error(.wrongType, field, "must be a whole number")
        }
        guard number.intValue > 0 else {
            throw error(.badNumber, field, "must be greater than zero, not \(number.intValue)")
        }
        guard number.doubleValue <= Double(limit) else {
            throw error(.badNumber, field, "must be at most \(limit), not \(number.stringValue)")
        }
        return number.intValue
    }

    func rejectUnknownFields() throws {
        // A storefront's price (`prices.DE.`) has the fields every storefront's has.
        let known = Self.knownFields[prefix.hasPrefix("prices.") ? "prices." : prefix] ?? []
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw error(.unknownField, unknown, "is not a catalog field; check its spelling")
        }
    }
}
