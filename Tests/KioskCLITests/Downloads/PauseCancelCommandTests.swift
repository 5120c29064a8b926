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

    @Test("pause keeps the bytes, resume continues from them; cancel deletes them")
    func pauseAndCancel() async throws {
        let setup = try await Setup()
        let pause = try await KioskCommand.run(["pause", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        #expect(pause.status == 0)
        #expect(try await KioskCommand.run(["downloads"], environment: ["KIOSK_HOME": setup.home]).stdout.contains("paused"))
        let resumed = try await KioskCommand.run(["resume"], environment: ["KIOSK_HOME": setup.home])
        #expect(resumed.stdout.contains("installed \(Self.atlas)"))
        let library = try await KioskCommand.run(["library", "--json"], environment: ["KIOSK_HOME": setup.home]).stdout
        #expect(library.contains(Self.atlas))
        let cancel = try await KioskCommand.run(["cancel", Self.atlas], environment: ["KIOSK_HOME": setup.home])
        #expect(cancel.status == 1)
        #expect(cancel.stderr == "kiosk: the download of \(Self.atlas) is installed and cannot become cancelled\n")
        _ = await setup.server.stop()
    }
}
