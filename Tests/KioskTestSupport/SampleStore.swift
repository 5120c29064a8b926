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
