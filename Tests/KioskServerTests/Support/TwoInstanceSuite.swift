import Foundation
import KioskServer
import KioskTestSupport

/// A suite that runs two `kiosk serve` instances over one PostgreSQL database. Conforming gives
/// it `Self.withTwoInstances`.
protocol TwoInstanceSuite: Sendable {}

extension TwoInstanceSuite {
    /// Instances A and B on their own data folders (their own packed content) and one database.
    static func withTwoInstances(configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
                                 _ body: @Sendable (_ a: (KioskServer, StoreHTTP), _ b: (KioskServer, StoreHTTP)) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        let database = try await TestPostgres.shared.freshDatabase()
        @Sendable func configuration(_ name: String) -> ServerConfiguration {
            var configuration = ServerConfiguration(
                catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: directory.url.appendingPathComponent(name))
            configuration.database = database
            configuration.accounts.passwordCost = 4
            configure(&configuration)
            return configuration
        }
        try await LiveServer.run(configuration("a")) { a, urlA in
            try await LiveServer.run(configuration("b")) { b, urlB in
                try await body((a, StoreHTTP(baseURL: urlA)), (b, StoreHTTP(baseURL: urlB)))
            }
        }
    }
}
