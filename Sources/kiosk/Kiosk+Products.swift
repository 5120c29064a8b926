import ArgumentParser
import Foundation
import KioskClient
import KioskCore

extension Kiosk {
    struct Products: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the products of the local catalog; works offline.",
            discussion: "Example: kiosk products --json"
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print the products as JSON.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                let (products, syncedAt) = try client.cachedCatalog()
                if json {
                    let document = ProductList(syncedAt: syncedAt, products: products)
                    print(String(decoding: try JSONEncoder.kiosk.encode(document), as: UTF8.self))
                    return
                }
                guard let syncedAt else {
                    print("no catalog yet; run `kiosk sync` first")
                    return
                }
                print("\(products.count) products, catalog synced \(Self.age(since: syncedAt)) ago")
                for product in products {
                    print(Self.line(for: product))
                }
            }
        }

        struct ProductList: Encodable {
            var syncedAt: Date?
            var products: [Product]
        }

        static func line(for product: Product) -> String {
            var detail: [String] = [product.kind.rawValue, product.price.description]
            if let credits = product.credits { detail.append("\(credits) credits") }
            if let creditPrice = product.creditPrice { detail.append("or \(creditPrice) credits") }
            if let date = product.publicationDate { detail.append("published \(date)") }
            if let months = product.periodMonths { detail.append("\(months)-month period") }
            if let content = product.content {
                detail.append("\(content.format.rawValue) \(ProgressDisplay.size(content.size))")
            }
            return "  \(product.id)  \(product.title)  (\(detail.joined(separator: ", ")))"
        }

        static func age(since date: Date) -> String {
            let seconds = max(0, Int(Date().timeIntervalSince(date)))
            switch seconds {
            case ..<60: return "\(seconds) s"
            case ..<3600: return "\(seconds / 60) min"
            case ..<86400: return "\(seconds / 3600) h"
            default: return "\(seconds / 86400) days"
            }
        }
    }
}
