import ArgumentParser
import KioskCommandLine
import KioskCore

extension Kiosk.Admin {
    /// `kiosk admin products owners ID` and `kiosk admin products remove ID [--force]`: a product
    /// gone from the catalog files stays deliverable to its owners until it is removed on purpose.
    struct Products: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Withdrawn products: how many accounts own one, and removing one on purpose.",
            discussion: """
                A product taken out of the catalog files (or marked "forSale": false) is off sale: no longer \
                offered or sold, and still delivered to everyone who owns it. Removing it takes it from them.

                Example: kiosk admin products owners com.kiosk.books.river-of-maps; kiosk admin products remove com.kiosk.books.river-of-maps --force
                """,
            subcommands: [Owners.self, Remove.self])

        struct Owners: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "How many accounts own a product (bought it, or a subscription period covers it).")
            @OptionGroup var options: Kiosk.Admin.Options
            @Argument(help: "The product ID.") var product: String
            func run() async throws {
                try await reportingErrors {
                    let answer = try await options.get(AdminProductOwners.self, "/v1/admin/products/\(PathSegment.encode(product))/owners")
                    try options.show(answer) { "\(answer.productId): owned by \(answer.owners) account(s)" }
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove a product gone from the catalog files: its owners can no longer download it.")
            @OptionGroup var options: Kiosk.Admin.Options
            @Argument(help: "The product ID.") var product: String
            @Flag(help: "Remove it although accounts own it.") var force = false
            func run() async throws {
                try await reportingErrors {
                    let path = "/v1/admin/products/\(PathSegment.encode(product))" + (force ? "?force=true" : "")
                    let answer = try options.decode(AdminProductOwners.self, from: try await options.call("DELETE", path), path: path)
                    try options.show(answer) { "removed \(answer.productId): \(answer.owners) account(s) owned it and can no longer download it" }
                }
            }
        }
    }
}
