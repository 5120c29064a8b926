import Foundation
import KioskArchive
import KioskCore
import Logging

/// Holds the catalog being served and replaces it on reload, keeping the last good one on error.
public actor CatalogService {
    private let loader: CatalogLoader
    private let contentStore: ContentStore
    private let logger: Logger
    public private(set) var current: PublishedCatalog

    /// Loads the catalog for the first time.
    /// - Throws: ``CatalogError`` or ``ArchiveError``: a server must not start on a bad catalog.
    public init(configuration: ServerConfiguration, logger: Logger) throws {
        self.loader = CatalogLoader(
            catalogDirectory: configuration.catalogDirectory, contentDirectory: configuration.contentDirectory)
        self.contentStore = ContentStore(dataDirectory: configuration.dataDirectory, logger: logger)
        self.logger = logger
        let first = try PublishedCatalog(entries: loader.load(), contentStore: contentStore)
        self.current = first
        logger.info("catalog loaded", metadata: ["products": "\(first.products.count)"])
    }

    /// Loads the catalog again; on error logs it and keeps serving the last good catalog.
    /// - Returns: true when the new catalog replaced the old one.
    @discardableResult
    public func reload() -> Bool {
        do {
            let next = try PublishedCatalog(entries: loader.load(), contentStore: contentStore)
            current = next
            logger.info("catalog reloaded", metadata: ["products": "\(next.products.count)"])
            return true
        } catch {
            logger.error("catalog reload refused; still serving the last good catalog", metadata: ["error": "\(error)"])
            return false
        }
    }
}
