import Foundation
import KioskArchive
import KioskCore

/// Unpacks a verified archive into a staging folder and moves it into `Library/<product id>/`.
///
/// The library never holds a half-unpacked book: everything is written in
/// `Library/.staging-<product id>` and appears by rename(2). A new version replaces the old one by
/// two renames; a crash between them leaves `.old-<product id>`, which the next install of that
/// product puts back or clears. Only the process holding the product's download claim calls
/// these, so it never touches another process's staging folder.
struct LibraryInstaller {
    let library: URL
    var limits = ExtractionLimits()

    func staging(_ productId: String) throws -> URL { try folder(".staging-", productId) }
    func old(_ productId: String) throws -> URL { try folder(".old-", productId) }
    func installed(_ productId: String) throws -> URL { try folder("", productId) }

    /// Paths are built only from IDs that pass ``ProductID``'s rule: one file name, never `/` or `..`.
    private func folder(_ prefix: String, _ productId: String) throws -> URL {
        guard ProductID.isValid(productId) else { throw ClientError.unsafeProductID(productId, source: "the library") }
        return library.appendingPathComponent(prefix + productId, isDirectory: true)
    }

    /// Installs `archive` as `productId` and returns the installed folder and its tree digest.
    /// - Throws: ``UnpackError``; the staging folder is removed and the library is unchanged.
    func install(_ archive: URL, as productId: String) throws -> (folder: URL, treeDigest: String) {
        let staging = try freshStaging(productId)
        do {
            _ = try ArchiveExtractor(limits: limits).extract(archive, into: staging)
        } catch {
            try? FileManager.default.removeItem(at: staging)
            throw error
        }
        return try moveIntoLibrary(staging, as: productId)
    }

    /// Starts unpacking `partial` into the staging folder while it downloads; see ``UnpackAhead``.
    func startUnpacking(_ partial: URL, size: Int64, as productId: String) throws -> UnpackAhead {
        let staging = try freshStaging(productId)
        return UnpackAhead(file: GrowingFile(partial, expectedSize: size), staging: staging, extractor: ArchiveExtractor(limits: limits))
    }

    /// Installs what `ahead` unpacked while the verified archive `partial` downloaded, or, when that
    /// did not succeed, unpacks `partial` again from its first byte.
    func install(_ ahead: UnpackAhead, orElse partial: URL, as productId: String) throws -> (folder: URL, treeDigest: String) {
        guard ahead.finish() else { return try install(partial, as: productId) }
        return try moveIntoLibrary(ahead.staging, as: productId)
    }

    /// An empty staging folder for `productId`, after putting back any interrupted swap.
    private func freshStaging(_ productId: String) throws -> URL {
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        try recoverInterruptedSwap(productId)
        let staging = try staging(productId)
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: false)
        return staging
    }

    /// Moves a complete staging folder into place as `Library/<productId>`.
    private func moveIntoLibrary(_ staging: URL, as productId: String) throws -> (folder: URL, treeDigest: String) {
        let fileManager = FileManager.default
        let digest = try Self.treeDigest(of: staging)
        let destination = try installed(productId)
        if fileManager.fileExists(atPath: destination.path) {
            let old = try old(productId)
            try rename(destination, to: old)
            try rename(staging, to: destination)
            try? fileManager.removeItem(at: old)
        } else {
            try rename(staging, to: destination)
        }
        return (destination, digest)
    }

    /// Takes a product out of the library (its purchase was revoked).
    func remove(_ productId: String) throws {
        let fileManager = FileManager.default
        try recoverInterruptedSwap(productId)
        let destination = try installed(productId)
        guard fileManager.fileExists(atPath: destination.path) else { return }
        // Renamed first, so the library never shows a half-deleted book.
        let old = try old(productId)
        try rename(destination, to: old)
        try fileManager.removeItem(at: old)
    }

    /// Puts back an old version whose replacement was interrupted, and clears a stale staging folder.
    func recoverInterruptedSwap(_ productId: String) throws {
        let fileManager = FileManager.default
        try? fileManager.removeItem(at: staging(productId))
        let old = try old(productId)
        let installed = try installed(productId)
        guard fileManager.fileExists(atPath: old.path) else { return }
        if fileManager.fileExists(atPath: installed.path) {
            try? fileManager.removeItem(at: old)
        } else {
            try? rename(old, to: installed)
        }
    }

    /// A SHA-256 over the sorted relative paths, kinds and sizes of everything in `folder`: cheap
    /// to recompute, and different when a file is missing, added or truncated.
    static func treeDigest(of folder: URL) throws -> String {
        var entries: [String] = []
        let base = folder.path.hasSuffix("/") ? folder.path : folder.path + "/"
        guard let walker = FileManager.default.enumerator(atPath: folder.path) else {
            throw ClientError.local(path: folder.path, problem: "cannot be read", action: "check its permissions")
        }
        while let relative = walker.nextObject() as? String {
            var info = stat()
            guard lstat(base + relative, &info) == 0 else { continue }
            let kind = info.st_mode & S_IFMT
            let size = kind == S_IFREG ? Int64(info.st_size) : 0
            entries.append("\(relative)\t\(kind)\t\(size)")
        }
        return FileDigest.sha256(of: Data(entries.sorted().joined(separator: "\n").utf8))
    }

    private func rename(_ source: URL, to destination: URL) throws {
        guard Foundation.rename(source.path, destination.path) == 0 else {
            throw UnpackError.disk(entry: nil, message: "cannot move \(source.lastPathComponent) into the library: \(String(cString: strerror(errno)))")
        }
    }
}
