import Foundation
import KioskArchive
import KioskCore

/// Unpacks a verified archive into a staging folder of its own claim and swaps it into
/// `Library/<product id>/`.
///
/// The library never holds a half-unpacked book, and no process touches another's files:
/// - each download claim unpacks into `Library/.staging-<id>+<claim token>`, a name no other
///   claim shares, so a process that lost its claim (suspended past its lease, say) removes only
///   its own folder; leftovers are swept only once the process named in their token is gone;
/// - the unpacked folder is checked against the archive's manifest (every entry's kind, size and
///   SHA-256, read back from disk) before it may be installed;
/// - the swap itself runs inside the database transaction that names the product installed and
///   checks the claim (a ``LibrarySwap`` handed to ``DownloadRows/markInstalled(_:claim:note:swap:)``),
///   so it happens only while the claim holds, and never at the same time as another process's
///   swap or removal.
struct LibraryInstaller {
    let library: URL
    var limits = ExtractionLimits()

    /// An unpacked archive in its claim's staging folder, with what the archive said it holds.
    struct Unpacked: Sendable {
        let staging: URL
        let manifest: ArchiveManifest
    }

    func staging(for claim: DownloadClaim) throws -> URL {
        try folder(".staging-", claim.productId, token: claim.token)
    }

    func installed(_ productId: String) throws -> URL { try folder("", productId) }

    /// Where an earlier version of Kiosk parked the old version during a swap.
    private func old(_ productId: String) throws -> URL { try folder(".old-", productId) }

    /// Paths are built only from IDs that pass ``ProductID``'s rule: one file name, never `/` or
    /// `..`, and never `+`, which separates a product from the claim a hidden folder belongs to.
    private func folder(_ prefix: String, _ productId: String, token: String? = nil) throws -> URL {
        guard ProductID.isValid(productId) else { throw ClientError.unsafeProductID(productId, source: "the library") }
        return library.appendingPathComponent(prefix + productId + (token.map { "+" + $0 } ?? ""), isDirectory: true)
    }

    // MARK: Unpacking (the claim's own folder; no lock needed)

    /// Unpacks `archive` into the claim's staging folder, from the bytes whose SHA-256 is `sha256`
    /// (the catalog's): the extraction hashes what it reads, through the one descriptor it reads.
    /// - Throws: ``UnpackError``, ``UnpackError/changedOnDisk(entry:detail:)`` when the bytes
    ///   unpacked are not the checked ones (the file was swapped or rewritten under its name); the
    ///   staging folder is removed.
    func unpack(_ archive: URL, expecting sha256: String, for claim: DownloadClaim) throws -> Unpacked {
        let staging = try freshStaging(for: claim)
        do {
            let summary = try ArchiveExtractor(limits: limits).extract(archive, into: staging)
            try Self.requireChecked(summary, sha256, archive: archive.lastPathComponent)
            return Unpacked(staging: staging, manifest: summary.manifest)
        } catch {
            discard(staging)
            throw error
        }
    }

    /// Places a verified publication file (EPUB, PDF, CBZ) into the claim's staging folder as
    /// `fileName`, byte for byte: it is never unpacked. The manifest says that one file, with its
    /// size and SHA-256, which ``check(_:)`` reads back from disk as it does an archive's entries.
    /// - Throws: ``UnpackError``; the staging folder is removed.
    func place(_ file: URL, as fileName: String, size: Int64, sha256: String, for claim: DownloadClaim) throws -> Unpacked {
        guard PublicationFileName.isSafe(fileName) else {
            throw UnpackError.escapesDestination(entry: ProductID.printable(fileName))
        }
        let staging = try freshStaging(for: claim)
        do {
            let destination = staging.appendingPathComponent(fileName, isDirectory: false)
            // A hard link first (no copy of a large file), else a copy; the partial stays until install.
            // Either way the placed file is read back and hashed against `sha256` by ``check(_:)``
            // (the manifest below): a file swapped under the partial's name is refused there.
            if link(file.path, destination.path) != 0 {
                try FileManager.default.copyItem(at: file, to: destination)
            }
            return Unpacked(staging: staging, manifest: .singleFile(fileName, size: size, sha256: sha256))
        } catch {
            discard(staging)
            throw error
        }
    }

    /// Starts unpacking `partial` into the claim's staging folder while it downloads; see ``UnpackAhead``.
    func startUnpacking(_ partial: URL, size: Int64, for claim: DownloadClaim) throws -> UnpackAhead {
        let staging = try freshStaging(for: claim)
        return UnpackAhead(file: GrowingFile(partial, expectedSize: size), staging: staging, extractor: ArchiveExtractor(limits: limits))
    }

    /// What `ahead` unpacked while the verified archive `partial` downloaded, when it unpacked
    /// the checked bytes, or else `partial` unpacked again from its first byte.
    func unpacked(_ ahead: UnpackAhead?, orElse partial: URL, expecting sha256: String, for claim: DownloadClaim) throws -> Unpacked {
        if let ahead, let summary = ahead.finish(), summary.archiveSHA256 == sha256 {
            return Unpacked(staging: ahead.staging, manifest: summary.manifest)
        }
        ahead?.abandon()
        return try unpack(partial, expecting: sha256, for: claim)
    }

    /// Installed means checked: the bytes an extraction read are the ones the catalog names.
    private static func requireChecked(_ summary: ArchiveExtractor.Summary, _ sha256: String, archive: String) throws {
        guard summary.archiveSHA256 == sha256 else {
            throw UnpackError.changedOnDisk(entry: archive, detail: summary.archiveSHA256.map {
                "the bytes unpacked have SHA-256 \($0.prefix(12))…, not the checked \(sha256.prefix(12))…: the file changed under its name"
            } ?? "the file changed while it was unpacked")
        }
    }

    /// Checks the unpacked folder against its manifest and gives its tree digest.
    /// - Throws: ``UnpackError/changedOnDisk(entry:detail:)`` naming the entry that differs; the folder is removed.
    func check(_ unpacked: Unpacked) throws -> String {
        do {
            try unpacked.manifest.check(unpacked.staging)
            return try Self.treeDigest(of: unpacked.staging)
        } catch let mismatch as ArchiveManifest.Mismatch {
            discard(unpacked.staging)
            throw UnpackError.changedOnDisk(entry: mismatch.path, detail: "\(mismatch)")
        }
    }

    /// A new, empty staging folder for the claim (a folder left by this claim earlier goes first).
    private func freshStaging(for claim: DownloadClaim) throws -> URL {
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        let staging = try staging(for: claim)
        discard(staging)
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: false)
        return staging
    }

    // MARK: The library itself (only inside the database's write transaction)

    /// Moves a checked staging folder into place as `Library/<productId>`: swapped with the
    /// installed version in one rename where the file system can (the library shows one version
    /// or the other, never neither), otherwise by two renames.
    /// - Returns: the folder now holding the replaced version, to ``discard(_:)`` after the commit.
    func swapIntoLibrary(_ staging: URL, as productId: String) throws -> URL? {
        try recoverInterruptedSwap(productId)
        let destination = try installed(productId)
        guard FileManager.default.fileExists(atPath: destination.path) else {
            try rename(staging, to: destination)
            return nil
        }
        if Platform.exchange(staging.path, destination.path) { return staging }
        guard errno == EINVAL || errno == ENOSYS else { throw Self.moveError(staging) }
        let old = try old(productId)
        try rename(destination, to: old)
        try rename(staging, to: destination)
        return old
    }

    /// Takes a product out of the library (its purchase was revoked): renamed first, so the library
    /// never shows a half-deleted book.
    /// - Returns: the folder to ``discard(_:)`` after the commit.
    func removeFromLibrary(_ productId: String, by owner: ClaimOwner) throws -> URL? {
        try recoverInterruptedSwap(productId)
        let destination = try installed(productId)
        guard FileManager.default.fileExists(atPath: destination.path) else { return nil }
        let removed = try folder(".removed-", productId, token: owner.id)
        discard(removed)
        try rename(destination, to: removed)
        return removed
    }

    /// Puts back an old version whose replacement an earlier Kiosk (two renames) left half-done.
    private func recoverInterruptedSwap(_ productId: String) throws {
        let fileManager = FileManager.default
        let old = try old(productId)
        guard fileManager.fileExists(atPath: old.path) else { return }
        if fileManager.fileExists(atPath: try installed(productId).path) {
            discard(old)
        } else {
            try? rename(old, to: try installed(productId))
        }
    }

    func discard(_ folder: URL) {
        try? FileManager.default.removeItem(at: folder)
    }

    /// Removes the hidden folders (staging, replaced or removed versions) left by processes that
    /// are gone, for `productId` or for every product. A live process's folders are never touched,
    /// however long it has been stopped.
    func sweepLeftovers(of productId: String? = nil) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: library.path) else { return }
        for name in names where name.hasPrefix(".") {
            guard let plus = name.firstIndex(of: "+") else {
                // An earlier Kiosk's staging folder (`.staging-<id>`), which no claim owns now.
                if name.hasPrefix(".staging-"), productId.map({ name == ".staging-" + $0 }) ?? true {
                    discard(library.appendingPathComponent(name))
                }
                continue
            }
            let subject = name[..<plus]
            let token = String(name[name.index(after: plus)...])
            if let productId, !subject.hasSuffix("-" + productId) { continue }
            if ClaimOwner.isGone(token) { discard(library.appendingPathComponent(name)) }
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
        guard Foundation.rename(source.path, destination.path) == 0 else { throw Self.moveError(source) }
    }

    private static func moveError(_ source: URL) -> UnpackError {
        .disk(entry: nil, message: "cannot move \(source.lastPathComponent) into the library: \(String(cString: strerror(errno)))")
    }
}

/// The file work of an install, done by ``LibraryInstaller/perform(_:)-swap`` when
/// ``DownloadRows/markInstalled(_:claim:note:swap:)`` runs it inside the transaction that names
/// the product installed, once the claim is known to hold: the old version's status and manifest
/// go first (a crash after the swap leaves none, never one of another version), the checked
/// folder is swapped into the library, and the partial file goes. A value: the rows' transaction
/// hands it to the installer, nothing is called back.
struct LibrarySwap {
    let installer: LibraryInstaller
    let staging: URL
    let productId: String
    /// The old version's installed status and manifest.
    let staleFiles: [URL]
    let partial: URL
}

/// The file work of taking a product's content out of the library (its purchase was revoked),
/// done by ``LibraryInstaller/perform(_:)-removal`` when ``DownloadRows/forgetContent(_:removal:)``
/// runs it inside the transaction that forgets its rows, so no install can slip in between: the
/// partial bytes go, and the installed folder is moved aside.
struct LibraryRemoval {
    let installer: LibraryInstaller
    let productId: String
    let owner: ClaimOwner
    let partial: URL
}

extension LibraryInstaller {
    /// Performs `swap` (``LibrarySwap``).
    /// - Returns: the replaced version's folder, to delete after the commit.
    func perform(_ swap: LibrarySwap) throws -> URL? {
        for file in swap.staleFiles { unlink(file.path) }
        let replaced = try swapIntoLibrary(swap.staging, as: swap.productId)
        unlink(swap.partial.path)
        return replaced
    }

    /// Performs `removal` (``LibraryRemoval``).
    /// - Returns: the folder moved aside, to delete after the commit.
    func perform(_ removal: LibraryRemoval) throws -> URL? {
        unlink(removal.partial.path)
        return try removeFromLibrary(removal.productId, by: removal.owner)
    }
}
