import Foundation
import KioskArchive
import KioskCore
import KioskTransfer
import Logging

/// The library's updates that fetch only what changed — ``DeltaUpdate`` for a zip, ``ChunkedUpdate``
/// for a publication file — and the check of a resumed partial file against its manifest.
///
/// Each builds in a place that only the library's own checks let into `Library/`: a claim's
/// staging folder, or the download's partial file. It writes no row and installs nothing: each
/// method answers what it came to, and ``Library`` records that and installs, so the download
/// rows keep their one writer.
struct Updates {
    /// Read for the catalog's manifest of a version, nothing else.
    let database: ClientDatabase
    let home: KioskHome
    let installer: LibraryInstaller
    let configuration: KioskClient.Configuration
    let logger: Logger

    // MARK: A resumed partial file

    /// Where a resumed download's partial file stops matching its manifest: the length it was cut
    /// back to (0 when it could not be cut and was removed), or nil to resume by its length.
    ///
    /// A zip resumed from a partial file continues after the entries of it that match the
    /// version's manifest (``PartialArchiveCheck``), a publication file after its chunks that
    /// match, not after whatever length a crash left. Without a manifest (tar.gz, an older
    /// catalog, a manifest that cannot be fetched or read) the resume trusts the length. The
    /// manifest's bytes are logged, not added to the run's bytes received: those count the
    /// archive's bytes, which a resume promises never to fetch twice.
    func checkedLength(of record: DownloadRecord, partial: URL, server: String) async throws -> Int64? {
        guard record.format == .zip || record.format.deliveredAsFile, record.partialETag != nil,
              let manifestSha256 = try manifestSha256(of: record)
        else { return nil }
        // Only a regular file is read back; anything else under the name the transfer refuses anyway.
        guard FileIdentity.ofRegularFile(partial.path) != nil,
              let length = try? FileManager.default.attributesOfItem(atPath: partial.path)[.size] as? Int64, length > 0 else { return nil }
        let manifest: ContentManifest
        let manifestBytes: Int64
        do {
            (manifest, manifestBytes) = try await DeltaUpdate.fetchManifest(
                from: Self.url(server, record, manifest: true), headers: [record.authorization],
                sha256: manifestSha256, record: record)
            if record.format.deliveredAsFile {
                _ = try ChunkedUpdate.usableChunks(manifest, size: record.size)
            } else {
                try DeltaUpdate.requireEntryRanges(manifest)
            }
        } catch let fallback as DeltaUpdate.Fallback {
            logger.info("resuming by the partial file's length", metadata: ["product": "\(record.productId)", "reason": "\(fallback)"])
            return nil
        }
        let outcome: PartialArchiveCheck.Outcome
        do {
            outcome = try PartialArchiveCheck(manifest: manifest).check(partial)
        } catch {
            logger.info("resuming by the partial file's length", metadata: ["product": "\(record.productId)", "reason": "the partial file could not be read back: \(error)"])
            return nil
        }
        logger.info("checked a resumed download's partial file against its manifest", metadata: [
            "product": "\(record.productId)", "entriesChecked": "\(outcome.entriesChecked)", "manifestBytes": "\(manifestBytes)",
        ])
        guard outcome.keep < length else { return nil }
        // A file that cannot be cut goes instead: bytes past a bad entry are never resumed from.
        var keep = outcome.keep
        if !PartialArchiveCheck.truncate(partial, to: keep) {
            unlink(partial.path)
            keep = 0
        }
        logger.notice("a resumed download's partial file did not match its manifest; resuming from the last good entry", metadata: [
            "product": "\(record.productId)", "entry": "\(outcome.failed ?? "")", "kept": "\(keep)", "of": "\(length)", "entriesChecked": "\(outcome.entriesChecked)",
        ])
        return keep
    }

    // MARK: By entries (a zip)

    /// An update of an installed zip built in the claim's staging folder from only the entries
    /// that changed; nil when it must be downloaded whole: not an update, not a zip, no manifest,
    /// a full download already under way, or anything in the update that did not fit.
    func byEntries(_ record: DownloadRecord, installed: LibraryItem?, claim: DownloadClaim, server: String) async throws -> DeltaUpdate.Result? {
        let id = record.productId
        guard configuration.updateByEntries, record.format == .zip, record.bytesDone == 0,
              let installed, installed.sha256 != record.sha256,
              let manifestSha256 = try manifestSha256(of: record),
              FileManager.default.fileExists(atPath: try installer.installed(id).path)
        else { return nil }
        do {
            return try await DeltaUpdate(installer: installer, home: home, logger: logger)
                .run(record, claim: claim, manifestSha256: manifestSha256, source: source(of: record, server: server))
        } catch let fallback as DeltaUpdate.Fallback {
            logger.info("downloading the whole archive for this update", metadata: ["product": "\(id)", "reason": "\(fallback)"])
            return nil
        }
    }

    // MARK: By chunks (a publication file)

    /// What an update by chunks needs, found before the partial file is opened.
    struct ChunkPlan {
        let installedFile: URL
        let manifestSha256: String
        let source: UpdateSource
        /// The installed file's chunks as kept after the last update, when still true of it.
        let known: [ContentChunks.Chunk]?
        let chunksFile: URL
        /// The server's ETag for the new version, so that a full download resumes from what is built.
        let etag: String
    }

    /// What an update by chunks came to.
    enum ChunkOutcome {
        /// Built; the library checks the file (size and SHA-256) before it installs it.
        case built(ChunkedUpdate.Result)
        /// It did not fit: the partial file holds a checked prefix of `kept` bytes, which the
        /// ordinary download continues (with If-Range), never from byte 0.
        case continueWhole(kept: Int64)
        /// The claim's row moved on (paused, cancelled, taken over).
        case stoppedElsewhere
        /// The run was cancelled with `kept` bytes built.
        case interrupted(kept: Int64)
        /// The disk filled (or refused) while it wrote: what was built stays, and the download waits.
        case diskFull(kept: Int64, error: TransferError)
    }

    /// The plan for an update of an installed publication file from its chunks, or nil when the
    /// ordinary download is to fetch it: not a file publication, nothing installed, no chunk manifest.
    func chunkPlan(_ record: DownloadRecord, installed: LibraryItem?, server: String) throws -> ChunkPlan? {
        let id = record.productId
        guard configuration.updateByEntries, record.format.deliveredAsFile,
              let installed, installed.sha256 != record.sha256,
              let manifestSha256 = try manifestSha256(of: record),
              let installedFile = try installedPublicationFile(id)
        else { return nil }
        let chunksFile = try home.installedChunks(id)
        return ChunkPlan(
            installedFile: installedFile, manifestSha256: manifestSha256,
            source: source(of: record, server: server),
            known: InstalledChunks.load(chunksFile, for: installedFile, sha256: installed.sha256),
            chunksFile: chunksFile, etag: "\"\(record.sha256)\"")
    }

    /// Builds the new version into `partial` (opened, its claim checked, by the library) in order,
    /// from the installed file's chunks and ranges for the rest, so that it is always a prefix of
    /// the new version. `progress` records the bytes built under the claim; false stops it.
    func byChunks(_ record: DownloadRecord, _ plan: ChunkPlan, partial: OpenedPartialFile, progress: @escaping @Sendable (Int64) -> Bool) async throws -> ChunkOutcome {
        do {
            return .built(try await ChunkedUpdate(logger: logger).run(
                record, installed: plan.installedFile, known: plan.known, partial: partial,
                manifestSha256: plan.manifestSha256, source: plan.source, progress: progress))
        } catch let fallback as ChunkedUpdate.Fallback {
            logger.info("downloading the rest of this update whole", metadata: ["product": "\(record.productId)", "kept": "\(partial.size)", "reason": "\(fallback)"])
            return .continueWhole(kept: partial.size)
        } catch is ChunkedUpdate.Stopped {
            return .stoppedElsewhere
        } catch is CancellationError {
            return .interrupted(kept: partial.size)
        } catch let error as TransferError where error.kind == .localWrite {
            return .diskFull(kept: partial.size, error: error)
        }
    }

    /// Keeps the new file's chunks beside it for the next update.
    func keepChunks(_ result: ChunkedUpdate.Result, of record: DownloadRecord, _ plan: ChunkPlan) throws {
        guard let fileName = record.fileName else { return }
        InstalledChunks.save(result.chunks, sha256: record.sha256, for: try installer.installed(record.productId).appendingPathComponent(fileName),
                             to: plan.chunksFile, logger: logger)
    }

    // MARK: Plumbing

    /// The catalog's manifest SHA-256 for the download's version; nil when the cached catalog
    /// names another version or none.
    private func manifestSha256(of record: DownloadRecord) throws -> String? {
        guard let content = try database.cachedProduct(record.productId)?.content, content.sha256 == record.sha256 else { return nil }
        return content.manifestSha256
    }

    /// The one file an installed publication's folder holds, or nil.
    private func installedPublicationFile(_ productId: String) throws -> URL? {
        let folder = try installer.installed(productId)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path), names.count == 1 else { return nil }
        let file = folder.appendingPathComponent(names[0])
        var info = stat()
        guard lstat(file.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return file
    }

    private func source(of record: DownloadRecord, server: String) -> UpdateSource {
        UpdateSource(manifestURL: Self.url(server, record, manifest: true), contentURL: Self.url(server, record, manifest: false),
                     headers: [record.authorization], stallSeconds: configuration.stallSeconds, maxReceiveSpeed: configuration.maxReceiveSpeed)
    }

    private static func url(_ server: String, _ record: DownloadRecord, manifest: Bool) -> String {
        let path = record.productId.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? record.productId
        return "\(server)/v1/content/\(path)\(manifest ? "/manifest" : "")?version=\(record.sha256)"
    }
}

/// Where an update asks for the version's manifest and its bytes (ranges of the archive, or of
/// the publication file), with what proves the purchase and the reader's limits for transfers.
struct UpdateSource {
    var manifestURL: String
    var contentURL: String
    var headers: [(name: String, value: String)]
    /// The reader's limits for transfers: a stall, and a receive speed.
    var stallSeconds = 30
    var maxReceiveSpeed: Int64?
}
