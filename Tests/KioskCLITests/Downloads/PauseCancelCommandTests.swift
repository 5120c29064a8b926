import Foundation
import GRDB
import KioskCore
import KioskTestSupport
import Testing

/// `kiosk pause` and `kiosk cancel` on a download.
@Suite("kiosk pause and kiosk cancel")
struct PauseCancelCommandTests {
    typealias Setup = AtlasHome
    static let atlas = AtlasHome.atlas

    @Test("pause keeps the bytes, resume continues from them; cancel of an installed book frees its files and kiosk resume ID brings it back")
    func pauseAndCancel() async throws {
        let setup = try await Setup()
        let pause = try await KioskCommand.run(["pause", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        #expect(pause.status == 0)
        #expect(try await KioskCommand.run(["downloads"], environment: ["KIOSK_HOME": setup.home]).stdout.contains("paused"))
        let resumed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resumed.stdout.contains("installed \(Self.atlas)"))
        let library = try await KioskCommand.run(["library", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(library.contains(Self.atlas))
        // Installed, cancel frees its files and keeps the purchase (the newsstand's removal, issue 67);
        // kiosk resume ID brings it back.
        let cancel = try await KioskCommand.run(["cancel", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        #expect(cancel.status == 0 && cancel.stdout == "\(Self.atlas): removed from this device; it stays yours, and kiosk resume \(Self.atlas) downloads it again\n", "\(cancel.stdout) \(cancel.stderr)")
        #expect(!(try await KioskCommand.run(["library", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout.contains(Self.atlas)))
        let again = try await KioskCommand.run(["resume", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        #expect(again.status == 0 && again.stdout.contains("installed \(Self.atlas)"), "\(again.stdout) \(again.stderr)")
        _ = await setup.server.stop()
    }
}
