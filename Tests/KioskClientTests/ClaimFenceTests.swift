import Foundation
import KioskArchive
import KioskCore
import KioskServer
import KioskTestSupport
import Testing
@testable import KioskClient

/// A download claim is fenced: a holder that lost it (stopped past its lease, its clock jumped)
/// can change nothing, touch no other claim's files, and install nothing.
@Suite("Fenced download claims, monotonic leases and checked installs")
struct ClaimFenceTests {
    static let book = LibraryTests.book
    static let manyFiles = "com.kiosk.books.many-pages"

    /// A monotonic clock the test moves by hand.
    final class ManualClock: @unchecked Sendable {
        private let lock = NSLock()
        private var instant: LeaseInstant

        init(boot: String = "test-boot") {
            instant = LeaseInstant(boot: boot, nanoseconds: 1_000_000_000)
        }

        func advance(seconds: TimeInterval) {
            lock.withLock { instant = instant.adding(seconds: seconds) }
        }

        func reboot(as boot: String) {
            lock.withLock { instant.boot = boot }
        }

        var clock: LeaseClock {
            LeaseClock { [self] in lock.withLock { instant } }
        }
    }

    @Test("a holder stopped past its lease loses the download: its progress, state changes and install are refused, and its swap never runs")
    func staleHolderIsFenced() async throws {
        try await LibraryTests.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            let rows = DownloadRows(database: context.client.database)
            let time = ManualClock()
            let stale = try #require(try rows.claimDueDownloads(for: ClaimOwner(), only: nil, lease: 15, clock: time.clock).first)
            #expect(try rows.holds(stale.claim))
            #expect(try rows.claimDueDownloads(for: ClaimOwner(), only: nil, lease: 15, clock: time.clock).isEmpty, "a live lease was taken")

            // The holder is stopped (SIGSTOP, a laptop lid): its lease runs out, another takes over.
            time.advance(seconds: 16)
            let fresh = try #require(try rows.claimDueDownloads(for: ClaimOwner(), only: nil, lease: 15, clock: time.clock).first)
            #expect(fresh.claim.generation == stale.claim.generation + 1)
            #expect(fresh.tookOverLiveOwner, "this test process is alive, so the old holder counts as live")
            #expect(try !rows.holds(stale.claim))

            // Continued, the stale holder finds every write refused.
            #expect(try !rows.recordProgress(stale.claim, bytesOnDisk: 1, etag: "\"x\""))
            #expect(throws: IllegalTransition.self) {
                try rows.beginVerifying(stale.claim, size: 1)
            }
            try rows.beginVerifying(fresh.claim, size: fresh.record.size)
            try rows.beginUnpacking(fresh.claim)
            // A checked folder in staging, to be swapped into a library of its own.
            let folders = try TemporaryDirectory()
            let installer = LibraryInstaller(library: folders.path("Library"))
            try folders.write("staged/chapter-1.txt", "unpacked")
            try FileManager.default.createDirectory(at: folders.path("Library"), withIntermediateDirectories: true)
            let swap = LibrarySwap(installer: installer, staging: folders.path("staged"), productId: Self.book, staleFiles: [], partial: folders.path("partial"))
            let installedFolder = try installer.installed(Self.book)
            let item = LibraryItem(productId: Self.book, version: "v", sha256: fresh.record.sha256, path: "/nowhere", installedAt: Date(), treeDigest: nil)
            #expect(throws: IllegalTransition.self) {
                _ = try rows.markInstalled(item, claim: stale.claim, swap: swap)
            }
            #expect(!FileManager.default.fileExists(atPath: installedFolder.path), "a stale holder moved its folder into the library")
            #expect(try rows.download(Self.book)?.state == .unpacking)
            // The holder of the claim installs; the claim is released.
            let installed = try rows.markInstalled(item, claim: fresh.claim, swap: swap).record
            #expect(FileManager.default.fileExists(atPath: installedFolder.path))
            #expect(installed.state == .installed && installed.owner == nil && installed.leaseDeadline == nil)
        }
    }

    @Test("a lease is measured on the monotonic clock: the wall clock a day ahead (or back) ends no live claim; a lease from another boot has lapsed")
    func leaseIgnoresWallClock() async throws {
        try await LibraryTests.withStore { context in
            _ = try await context.client.buy(Self.book, downloadNow: false)
            let rows = DownloadRows(database: context.client.database)
            let time = ManualClock()
            let held = try #require(try rows.claimDueDownloads(for: ClaimOwner(), only: nil, lease: 15, clock: time.clock).first)
            for jump in [86_400.0, -86_400.0] {
                #expect(try rows.claimDueDownloads(for: ClaimOwner(), only: nil, lease: 15, now: Date().addingTimeInterval(jump), clock: time.clock).isEmpty)
            }
            // The monotonic clock does not run while the machine sleeps: a long sleep lapses nothing.
            #expect(try rows.downloadsClaimedByOthers(than: ClaimOwner(), only: nil, clock: time.clock).map(\.productId) == [Self.book])
            // Renewing moves the deadline on that clock.
            time.advance(seconds: 10)
            try rows.renewClaims(of: held.claim.owner, lease: 15, clock: time.clock)
            time.advance(seconds: 10)
            #expect(try rows.claimDueDownloads(for: ClaimOwner(), only: nil, lease: 15, clock: time.clock).isEmpty)
            // After a reboot no process of the old boot can hold anything.
            time.reboot(as: "another-boot")
            #expect(try rows.claimDueDownloads(for: ClaimOwner(), only: nil, lease: 15, clock: time.clock).count == 1)
        }
    }

    @Test("an unpacked folder is checked against the archive's manifest: a file removed, truncated, changed or added is refused and the folder discarded")
    func installCheckedAgainstManifest() async throws {
        try await LibraryTests.withStore(prepare: { try $0.addManyFileBook(Self.manyFiles, files: 6, kilobytes: 8) }) { context in
            let archive = try #require(try await context.server.catalog.current.archives[Self.manyFiles]).file
            let installer = LibraryInstaller(library: context.home.appendingPathComponent("Library"))
            let claim = DownloadClaim(productId: Self.manyFiles, owner: ClaimOwner(), generation: 1)
            let sha256 = try FileDigest.sha256(of: archive)
            let clean = try installer.unpack(archive, expecting: sha256, for: claim)
            #expect(clean.manifest.entries.filter { $0.kind == .file }.count == 6)
            #expect(try !installer.check(clean).isEmpty)

            let tamperings: [(String, (URL) throws -> Void)] = [
                ("removed", { try FileManager.default.removeItem(at: $0.appendingPathComponent("page-003.bin")) }),
                ("truncated", { try Data(count: 10).write(to: $0.appendingPathComponent("page-001.bin")) }),
                ("changed", { folder in
                    let file = folder.appendingPathComponent("page-002.bin")
                    var bytes = try Data(contentsOf: file)
                    bytes[100] ^= 0xff
                    try bytes.write(to: file)
                }),
                ("added", { try Data("x".utf8).write(to: $0.appendingPathComponent("extra.txt")) }),
            ]
            // Installed means checked: an archive that is not the checked bytes (another file put
            // under the partial's name between the check and the unpack) is refused, its staging gone.
            let swapped = context.home.appendingPathComponent("swapped.zip")
            try FileManager.default.copyItem(at: archive, to: swapped)
            let handle = try FileHandle(forUpdating: swapped)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data("trailing bytes".utf8))
            try handle.close()
            #expect(throws: UnpackError.self, "bytes other than the checked ones were unpacked") {
                _ = try installer.unpack(swapped, expecting: sha256, for: claim)
            }
            #expect(!FileManager.default.fileExists(atPath: try installer.staging(for: claim).path))
            for (what, tamper) in tamperings {
                let unpacked = try installer.unpack(archive, expecting: sha256, for: claim)
                try tamper(unpacked.staging)
                #expect(throws: UnpackError.self, "a \(what) file was accepted") { _ = try installer.check(unpacked) }
                #expect(!FileManager.default.fileExists(atPath: unpacked.staging.path))
            }
        }
    }

    @Test("staging belongs to one claim: a live process's folder is never swept, however long it was stopped; a dead one's is")
    func stagingSweptOnlyWhenOwnerIsGone() throws {
        let directory = try TemporaryDirectory()
        let installer = LibraryInstaller(library: directory.path("Library"))
        let dead = Process()
        dead.executableURL = URL(fileURLWithPath: "/bin/true")
        try dead.runAlone()
        dead.waitForExit()
        let live = DownloadClaim(productId: Self.book, owner: ClaimOwner(), generation: 3)
        let gone = DownloadClaim(productId: Self.book, owner: ClaimOwner(id: "\(dead.processIdentifier):deadbeef"), generation: 2)
        for claim in [live, gone] {
            try FileManager.default.createDirectory(at: try installer.staging(for: claim).appendingPathComponent("pages"), withIntermediateDirectories: true)
        }
        installer.sweepLeftovers(of: Self.book)
        #expect(FileManager.default.fileExists(atPath: try installer.staging(for: live).path))
        #expect(!FileManager.default.fileExists(atPath: try installer.staging(for: gone).path))
        #expect(try installer.staging(for: live) != installer.staging(for: DownloadClaim(productId: Self.book, owner: live.owner, generation: 4)))
    }

    @Test("an endless body for a 2 KiB book: nothing is written past 2 KiB, each attempt ends there as a protocol error, the second time the download fails")
    func endlessBodyStopsAtDeclaredSize() async throws {
        try await HostileServer.run { server, url in
            server.content = HostileServer.endless()
            let directory = try TemporaryDirectory()
            let client = try KioskClient(home: KioskHome(root: directory.path("home")), server: url)
            let content = ContentDescriptor(format: .zip, size: 2048, sha256: String(repeating: "a", count: 64), version: "1")
            try DownloadRows(database: client.database).enqueueDownload(productId: Self.book, content: content, receipt: "receipt", transactionId: nil)
            let report = try await client.runDownloads()
            #expect(report.failed == [Self.book])
            #expect(report.bytesReceived <= 2 * 2048, "\(report.bytesReceived) bytes written for a 2 KiB book")
            let record = try #require(try DownloadRows(database: client.database).download(Self.book))
            #expect(record.state == .failed)
            #expect(record.lastError?.contains("sent more than the 2048 bytes declared for it") == true, "\(record.lastError ?? "")")
            #expect(!FileManager.default.fileExists(atPath: try client.home.partialFile(Self.book).path))
        }
    }

    @Test("a placed publication file changed on disk before the install's check: refused as changed (not a disk write failure), retried, its folder gone")
    func placedFileChangedBeforeCheck() throws {
        let directory = try TemporaryDirectory()
        let installer = LibraryInstaller(library: directory.path("Library"))
        let claim = DownloadClaim(productId: Self.book, owner: ClaimOwner(), generation: 1)
        let file = directory.path("book.epub")
        let bytes = Data("the publisher's bytes".utf8)
        try bytes.write(to: file)
        let placed = try installer.place(file, as: "book.epub", size: Int64(bytes.count), sha256: FileDigest.sha256(of: bytes), for: claim)
        // A hard link: the edit reaches the placed file too.
        try Data("someone else's bytes!".utf8).write(to: file)
        #expect {
            _ = try installer.check(placed)
        } throws: { error in
            guard case UnpackError.changedOnDisk(let entry, _) = error else { return false }
            return entry == "book.epub" && !(error as? UnpackError)!.isHostile
                && "\(error)".contains("changed on disk before it could be installed") && !"\(error)".contains("cannot write")
        }
        #expect(!FileManager.default.fileExists(atPath: placed.staging.path))
    }

    @Test("a download taken over from a stopped owner on a disk without room to copy its committed bytes keeps them and waits (the fault suite's seed 4545 asked from byte 0); with room again it goes on from them")
    func takeoverOnFullDiskKeepsBytes() async throws {
        try #require(SmallDisk.canMount, "mounting a small disk (tmpfs) needs root: run the tests as root")
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        // About 4 MiB that do not compress, as tar.gz.
        try store.addManyFileBook(Self.manyFiles, files: 20, kilobytes: 200)
        let disk = try SmallDisk(at: directory.path("home"), megabytes: 16)
        defer { disk.unmount() }
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { server, url in
            let client = try KioskClient(home: KioskHome(root: disk.path), server: url)
            _ = try await client.sync()
            _ = try await client.buy(Self.manyFiles, downloadNow: false)
            let archive = try #require(try await server.catalog.current.archives[Self.manyFiles])
            let bytes = try Data(contentsOf: archive.file)
            let committed = bytes.count / 2

            // A process stopped past its lease (this test process, so it counts as alive): its claim,
            // its committed bytes, its file.
            let stale = try #require(try DownloadRows(database: client.database).claimDueDownloads(for: ClaimOwner(), only: nil, lease: 0.01).first)
            let partial = disk.path.appendingPathComponent("downloads/\(Self.manyFiles).partial")
            try FileManager.default.createDirectory(at: partial.deletingLastPathComponent(), withIntermediateDirectories: true)
            try bytes.prefix(committed).write(to: partial)
            #expect(try DownloadRows(database: client.database).recordProgress(stale.claim, bytesOnDisk: Int64(committed), etag: "\"\(archive.sha256)\""))
            try await Task.sleep(for: .milliseconds(50))

            // The disk keeps less room than a copy of the committed bytes needs.
            let available = try #require(DiskSpace.available(at: disk.path))
            try Data(count: Int(available) - committed / 2).write(to: disk.path.appendingPathComponent("filler"))
            _ = try await client.runDownloads()
            let waiting = try #require(try client.downloads().first { $0.productId == Self.manyFiles })
            #expect(waiting.state == .waiting, "\(waiting.state)")
            #expect(waiting.bytesDone == Int64(committed), "the committed bytes were dropped: the next attempt starts from byte 0")
            #expect(waiting.lastError?.contains("free some space") == true, "\(waiting.lastError ?? "")")
            #expect(PartialFile.parked(partial)?.writer == stale.claim.owner.id, "parked under the name of the process that may still write to it")

            // Room again: the parked bytes come back as a file of the new claim's own, and the
            // download goes on from them.
            disk.free()
            _ = try DownloadRows(database: client.database).pauseDownload(Self.manyFiles)
            try DownloadRows(database: client.database).unpauseAll()
            let report = try await client.runDownloads()
            #expect(report.installed == [Self.manyFiles])
            #expect(report.bytesReceived <= Int64(bytes.count - committed) + 65_536, "received \(report.bytesReceived) of \(bytes.count): it started over")
            #expect(PartialFile.parked(partial) == nil)
        }
    }
}
