import Foundation
import KioskArchive

/// Unpacks a verified archive into a staging folder and moves it into `Library/<product id>/`.
///
/// The library never holds a half-unpacked book: everything is written in `Library/.staging-*`
/// and appears by rename(2). A new version replaces the old one by two renames; a crash between
/// them leaves `.old-*`, which ``recoverInterruptedSwaps()`` puts back.
struct LibraryInstaller {
    let library: URL
    var limits = ExtractionLimits()

    /// Installs `archive` as `productId` and returns the installed folder.
    /// - Throws: ``UnpackError``; the staging folder is removed and the library is unchanged.
    func install(_ archive: URL, as productId: String) throws -> URL {
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: library, withIntermediateDirectories: true)
        let token = UUID().uuidString.prefix(8)
        let staging = library.appendingPathComponent(".staging-\(productId)-\(token)", isDirectory: true)
        try fileManager.createDirectory(at: staging, withIntermediateDirectories: false)
        do {
            _ = try ArchiveExtractor(limits: limits).extract(archive, into: staging)
        } catch {
            try? fileManager.removeItem(at: staging)
            throw error
        }
        let destination = library.appendingPathComponent(productId, isDirectory: true)
        if fileManager.fileExists(atPath: destination.path) {
            let old = library.appendingPathComponent(".old-\(productId)-\(token)", isDirectory: true)
            try rename(destination, to: old)
            try rename(staging, to: destination)
            try? fileManager.removeItem(at: old)
        } else {
            try rename(staging, to: destination)
        }
        return destination
    }

    /// Puts back an old version whose replacement was interrupted, and clears stale staging folders.
    func recoverInterruptedSwaps() {
        let fileManager = FileManager.default
        guard let names = try? fileManager.contentsOfDirectory(atPath: library.path) else { return }
        for name in names where name.hasPrefix(".old-") || name.hasPrefix(".staging-") {
            let url = library.appendingPathComponent(name)
            let productId = String(name.drop(while: { $0 != "-" }).dropFirst().dropLast(9))
            let installed = library.appendingPathComponent(productId)
            if name.hasPrefix(".old-"), !productId.isEmpty, !fileManager.fileExists(atPath: installed.path) {
                try? rename(url, to: installed)
            } else {
                try? fileManager.removeItem(at: url)
            }
        }
    }

    private func rename(_ source: URL, to destination: URL) throws {
        guard Foundation.rename(source.path, destination.path) == 0 else {
            throw UnpackError.disk(entry: nil, message: "cannot move \(source.lastPathComponent) into the library: \(String(cString: strerror(errno)))")
        }
    }
}
