import Foundation

/// A private copy of the bundled `Catalog/` and `Content/`, which a test may edit freely.
public struct SampleStore: Sendable {
    public let catalog: URL
    public let content: URL
    public let data: URL

    /// The repository's root, found from this file's own path.
    public static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public init(in directory: TemporaryDirectory) throws {
        catalog = directory.path("Catalog")
        content = directory.path("Content")
        data = directory.path("server-data")
        try FileManager.default.copyItem(at: Self.repository.appendingPathComponent("Catalog"), to: catalog)
        try FileManager.default.copyItem(at: Self.repository.appendingPathComponent("Content"), to: content)
    }

    /// Reads, edits and writes back one catalog file's product list.
    public func editCatalog(_ file: String, _ edit: (inout [[String: Any]]) -> Void) throws {
        let url = catalog.appendingPathComponent(file)
        let root = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
        var products = root["products"] as? [[String: Any]] ?? []
        edit(&products)
        let data = try JSONSerialization.data(withJSONObject: ["products": products], options: [.prettyPrinted, .sortedKeys])
        try data.write(to: url)
    }
}

extension SampleStore {
    public static let harborMonthly = "com.kiosk.magazines.harbor-monthly.subscription.monthly"
    public static let harborSeries = "com.kiosk.magazines.harbor-monthly"

    /// Gives Harbor Monthly's monthly subscription `graceDays` of billing grace (nil: none) and adds
    /// issues of the series, copies of issue 03, published on the given days (id suffix → yyyy-MM-dd).
    public func editHarborMonthly(graceDays: Int?, issues: [(suffix: String, day: String)]) throws {
        try editCatalog("magazines.json") { products in
            for index in products.indices where products[index]["id"] as? String == Self.harborMonthly {
                if let graceDays { products[index]["gracePeriodDays"] = graceDays }
            }
            guard let template = products.first(where: { ($0["id"] as? String)?.hasSuffix("issue-03") == true }) else { return }
            for (number, (suffix, day)) in issues.enumerated() {
                var issue = template
                issue["id"] = "\(Self.harborSeries).\(suffix)"
                issue["title"] = "Harbor Monthly \(suffix)"
                issue["issueNumber"] = 100 + number
                issue["publicationDate"] = day
                products.append(issue)
            }
        }
    }

    /// Adds a book `id` whose content is `megabytes` MiB of bytes that do not compress, packed as zip.
    /// Adds a book of `files` incompressible files of `kilobytes` each, packed as tar.gz: an
    /// archive whose first files can be unpacked long before its last byte arrives.
    /// `format` zip gives an archive whose entries can be fetched on their own.
    public func addManyFileBook(_ id: String, files: Int, kilobytes: Int, format: String = "tar.gz") throws {
        let folderName = id.split(separator: ".").last.map(String.init) ?? "many"
        let folder = content.appendingPathComponent("books/\(folderName)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for index in 0..<files {
            try TestOrigin.incompressible(kilobytes << 10, seed: "page-\(index)").write(to: folder.appendingPathComponent(String(format: "page-%03d.bin", index)))
        }
        try addBook(id, title: "Book of many files \(folderName)", folder: folderName, format: format)
    }

    public func addLargeBook(_ id: String, megabytes: Int) throws {
        let folderName = id.split(separator: ".").last.map(String.init) ?? "large"
        let folder = content.appendingPathComponent("books/\(folderName)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try TestOrigin.incompressible(megabytes << 20).write(to: folder.appendingPathComponent("plates.bin"))
        try Data("# \(folderName)\n".utf8).write(to: folder.appendingPathComponent("index.md"))
        try addBook(id, title: "Large book \(folderName)", folder: folderName, format: "zip")
    }

    /// A copy of the first book under a new ID, title and content folder.
    private func addBook(_ id: String, title: String, folder: String, format: String) throws {
        try editCatalog("books.json") { products in
            var book = products[0]
            book["id"] = id
            book["title"] = title
            book["content"] = ["path": "books/\(folder)", "format": format]
            products.append(book)
        }
    }
}
