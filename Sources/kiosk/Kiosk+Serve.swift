import ArgumentParser
import Foundation
import Hummingbird
import KioskServer
import Logging

extension Kiosk {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the store's server over a catalog and its content.",
            discussion: """
                Prints `listening on http://HOST:PORT` once it accepts connections. SIGHUP reloads the
                catalog (a bad one is logged and the last good one keeps serving); SIGINT or SIGTERM stop
                it gracefully.

                Example: kiosk serve --catalog Catalog --content Content --port 0
                """
        )

        @Option(help: ArgumentHelp("The folder of catalog .json files.", valueName: "dir"))
        var catalog = "Catalog"

        @Option(help: ArgumentHelp("The folder of content folders and archives.", valueName: "dir"))
        var content = "Content"

        @Option(help: ArgumentHelp("Where the server keeps packed archives, keys and its database.", valueName: "dir"))
        var data = ".kiosk-server"

        @Option(help: "The address to listen on.")
        var host = "127.0.0.1"

        @Option(help: "The port to listen on; 0 picks a free one.")
        var port = 8080

        func validate() throws {
            guard (0...65535).contains(port) else {
                throw ValidationError("--port must be between 0 and 65535, not \(port)")
            }
        }

        func run() async throws {
            LogSetup.bootstrap()
            try await reportingErrors {
                let configuration = ServerConfiguration(
                    catalogDirectory: URL(fileURLWithPath: catalog),
                    contentDirectory: URL(fileURLWithPath: content),
                    dataDirectory: URL(fileURLWithPath: data),
                    host: host, port: port)
                let server = try await KioskServer(configuration: configuration)
                let reloadSignal = Self.reloadOnHangUp(server.catalog)
                defer { reloadSignal.cancel() }
                let host = self.host
                let app = server.makeApplication { port in
                    FileHandle.standardOutput.write(Data("listening on http://\(host):\(port)\n".utf8))
                }
                try await app.runService()
            }
        }

        /// SIGHUP reloads the catalog, as daemons conventionally do.
        static func reloadOnHangUp(_ catalog: CatalogService) -> any DispatchSourceSignal {
            signal(SIGHUP, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
            source.setEventHandler {
                Task { await catalog.reload() }
            }
            source.resume()
            return source
        }
    }
}
