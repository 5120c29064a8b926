import Foundation

/// One product of the master list, validated, with where its content lives on the server's disk.
public struct CatalogEntry: Sendable, Equatable {
    /// The product as it will be published, without its content descriptor (known only once packed).
    public var product: Product
    /// The content folder or ready-made archive under `Content/`, if the product has content.
    public var content: ContentSource?
    /// The catalog file this entry came from, for error messages.
    public var file: String
    /// The cover image file under `Content/` the catalog names (`cover`), if any.
    public var cover: URL?

    public init(product: Product, content: ContentSource?, file: String, cover: URL? = nil) {
        self.product = product
        self.content = content
        self.file = file
        self.cover = cover
    }
}

/// Where a product's content lives and how it is delivered.
public struct ContentSource: Sendable, Equatable {
    /// A folder to pack, or an archive file to serve as it is.
    public var location: URL
    public var isFolder: Bool
    public var format: ArchiveFormat

    public init(location: URL, isFolder: Bool, format: ArchiveFormat) {
        self.location = location
        self.isFolder = isFolder
        self.format = format
    }
}
