import ArgumentParser
import Foundation
import Hummingbird
import KioskCore
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

        // Every flag can also be set by a KIOSK_* variable; the flag wins.
        @Option(help: ArgumentHelp("The folder of catalog .json files ($KIOSK_CATALOG).", valueName: "dir"))
        var catalog = Self.environment("KIOSK_CATALOG") ?? "Catalog"

        @Option(help: ArgumentHelp("The folder of content folders and archives ($KIOSK_CONTENT).", valueName: "dir"))
        var content = Self.environment("KIOSK_CONTENT") ?? "Content"

        @Option(help: ArgumentHelp("Where the server keeps packed archives, keys and its database ($KIOSK_DATA).", valueName: "dir"))
        var data = Self.environment("KIOSK_DATA") ?? ".kiosk-server"

        @Option(help: "The address to listen on ($KIOSK_HOST).")
        var host = Self.environment("KIOSK_HOST") ?? "127.0.0.1"

        @Option(help: "The port to listen on; 0 picks a free one ($KIOSK_PORT).")
        var port = Self.environment("KIOSK_PORT").flatMap(Int.init) ?? 8080

        @Option(help: "Which receipts this store signs and honours: sandbox or production ($KIOSK_ENVIRONMENT).")
        var environment = Self.environment("KIOSK_ENVIRONMENT").flatMap(StoreEnvironment.init(rawValue:)) ?? .sandbox

        static func environment(_ name: String) -> String? {
            ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
        }

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
                    host: host, port: port, environment: environment)
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

extension StoreEnvironment: ExpressibleByArgument {}
