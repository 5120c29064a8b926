import Foundation
import KioskTestSupport
import Testing

/// `Examples/EmbeddedReader`, the program that embeds the client engine through its public API
/// alone (the DocC getting-started article walks through it), run against a live store: an
/// example that no longer does what it shows fails here rather than rotting.
@Suite("The embedded-engine example")
struct EmbeddedReaderTests {
    @Test("embedded-reader syncs, buys a book, sees its events and finds it in the library")
    func embeddedReaderBuysAndInstalls() async throws {
        let program = KioskCommand.executable.deletingLastPathComponent().appendingPathComponent("embedded-reader")
        guard FileManager.default.isExecutableFile(atPath: program.path) else {
            throw TestServiceError("\(program.path) is missing: build every target first (swift build --build-tests, as make test does)")
        }
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let server = try await ServerProcess.start(store, log: directory.path("server.log"))
        defer { Task { _ = await server.stop() } }
        let book = "com.kiosk.books.river-of-maps"
        let home = directory.path("app-home")

        let run = try await KioskCommand.run([server.url, home.path, book], program: program)
        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("catalog: "), "\(run.stdout)")
        #expect(run.stdout.contains("purchase of \(book): finished"), "\(run.stdout)")
        #expect(run.stdout.contains("download of \(book): installed"), "\(run.stdout)")
        #expect(run.stdout.contains("bought \(book): complete"), "\(run.stdout)")
        #expect(run.stdout.contains("library: \(book) "), "\(run.stdout)")
        #expect(FileManager.default.fileExists(atPath: home.appendingPathComponent("Library/\(book)").path))

        // Run again: the book is owned, so nothing is charged and the library still holds it.
        let again = try await KioskCommand.run([server.url, home.path, book], program: program)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("library: \(book) "), "\(again.stdout)")
        #expect(!again.stdout.contains("purchase of \(book): purchasing"), "a second purchase was sent: \(again.stdout)")

        // A careless call: a product the store does not sell is one line on stderr and exit 1.
        let unknown = try await KioskCommand.run([server.url, home.path, "com.kiosk.books.no-such-book"], program: program)
        #expect(unknown.status == 1)
        #expect(unknown.stderr.hasPrefix("embedded-reader: "), "\(unknown.stderr)")
        #expect(unknown.stderr.split(separator: "\n").count == 1, "\(unknown.stderr)")
    }
}
