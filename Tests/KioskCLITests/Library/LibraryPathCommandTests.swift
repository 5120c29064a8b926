import Foundation
import KioskTestSupport
import Testing

@Suite("kiosk open and kiosk library --path: where a product's files are")
struct LibraryPathCommandTests {
    static let book = "com.kiosk.books.river-of-maps"

    @Test("prints the product's folder; a home copied elsewhere lists its own folders; a product not installed is one line")
    func openPrintsTheFolderOfThisHome() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        let home = directory.path("home").path
        let buy = try await KioskCommand.run(["buy", Self.book, "--server", server.url], environment: ["KIOSK_HOME": home])
        #expect(buy.status == 0, "\(buy.stderr)")
        _ = await server.stop()

        // Offline from here: the server is gone.
        let folder = "\(home)/Library/\(Self.book)"
        let opened = try await KioskCommand.run(["open", Self.book], environment: ["KIOSK_HOME": home])
        #expect(opened.status == 0 && opened.stderr == "", "\(opened.stderr)")
        #expect(opened.stdout == "\(folder)\n")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(!files.isEmpty, "the folder kiosk open printed holds the book")
        let byLibrary = try await KioskCommand.run(["library", "--path", Self.book], environment: ["KIOSK_HOME": home])
        #expect(byLibrary.status == 0 && byLibrary.stdout == "\(folder)\n", "\(byLibrary.stderr)")

        // The whole home copied elsewhere (a new disk, a backup restored): its own paths.
        let copy = directory.path("copied-home").path
        let copied = try Process.run(URL(fileURLWithPath: "/bin/cp"), arguments: ["-a", home, copy])
        copied.waitForExit()
        #expect(copied.terminationStatus == 0)
        let fromCopy = try await KioskCommand.run(["open", Self.book], environment: ["KIOSK_HOME": copy])
        #expect(fromCopy.status == 0 && fromCopy.stdout == "\(copy)/Library/\(Self.book)\n", "\(fromCopy.stderr)")
        let listed = try await KioskCommand.run(["library"], environment: ["KIOSK_HOME": copy])
        let line = try #require(listed.stdout.split(separator: "\n").first { $0.hasPrefix(Self.book) })
        #expect(line.hasSuffix("  \(copy)/Library/\(Self.book)"), "\(line)")
        #expect(!listed.stdout.contains(home + "/"), "\(listed.stdout)")
        let json = try await KioskCommand.run(["library", "--json"], environment: ["KIOSK_HOME": copy])
        let rows = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(rows.first?["path"] as? String == "\(copy)/Library/\(Self.book)")

        let unknown = try await KioskCommand.run(["open", "com.kiosk.books.lighthouse-keeper"], environment: ["KIOSK_HOME": copy])
        #expect(unknown.status == 1 && unknown.stdout == "")
        #expect(unknown.stderr == "kiosk: com.kiosk.books.lighthouse-keeper is not installed: nothing of it is in this library; kiosk library lists what is installed; kiosk buy or kiosk restore brings it\n")

        try FileManager.default.removeItem(atPath: "\(copy)/Library/\(Self.book)")
        let missing = try await KioskCommand.run(["open", Self.book], environment: ["KIOSK_HOME": copy])
        #expect(missing.status == 1)
        #expect(missing.stderr == "kiosk: \(Self.book) is not installed: its folder \(copy)/Library/\(Self.book) is missing; run kiosk resume to download it again\n")
    }
}
