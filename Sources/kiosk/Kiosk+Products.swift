import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient
import KioskCore

extension Kiosk {
    struct Products: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the products of the local catalog, marking what the account owns; works offline.",
            discussion: """
                A book or issue the account owns is marked [owned], a subscription [subscribed until …] \
                or [expired …], from this device's own receipts and library.

                Example: kiosk products --json
                """
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print the products as JSON.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                let holdings = try await AccountHoldings.load(client)
                // A product at a time, however large the catalog: printed as it is read.
                let (count, syncedAt) = try client.cachedCatalogSummary()
                var output = ""
                output.reserveCapacity(Self.flushAt + 1024)
                func emit(_ text: String) {
                    output += text
                    if output.utf8.count >= Self.flushAt { flush() }
                }
                func flush() {
                    FileHandle.standardOutput.write(Data(output.utf8))
                    output.removeAll(keepingCapacity: true)
                }
                if json {
                    // The same bytes as encoding `{"owned": [...], "products": [...], "syncedAt": ...}` whole
                    // (sorted keys), without holding the list.
                    let owned = String(decoding: try JSONEncoder.kiosk.encode(holdings.rows), as: UTF8.self)
                    emit(#"{"owned":"# + owned + #","products":["#)
                    var first = true
                    try client.forEachCachedProduct { product in
                        emit((first ? "" : ",") + String(decoding: try JSONEncoder.kiosk.encode(product), as: UTF8.self))
                        first = false
                    }
                    emit("]")
                    if let syncedAt {
                        emit(#","syncedAt":"# + String(decoding: try JSONEncoder.kiosk.encode(syncedAt), as: UTF8.self))
                    }
                    emit("}\n")
                    flush()
                    return
                }
                guard let syncedAt else {
                    print("no catalog yet; run `kiosk sync` first")
                    return
                }
                emit("\(count) products, catalog synced \(Self.age(since: syncedAt)) ago\n")
                try client.forEachCachedProduct { product in
                    let mark = holdings.mark(product.id)
                    // Off sale is no longer offered: listed only for those who own it.
                    guard product.forSale != false || mark != nil else { return }
                    emit(Self.line(for: product) + (mark.map { "  [\($0)]" } ?? "") + "\n")
                }
                flush()
            }
        }

        /// Bytes of output gathered before each write.
        static let flushAt = 64 << 10

        static func line(for product: Product) -> String {
            var detail: [String] = [product.kind.rawValue, Price.cents(product.price.amount).map { Price.shown(cents: $0, product.price.currency) } ?? product.price.description]
            if let credits = product.credits { detail.append("\(credits) credits") }
            if let creditPrice = product.creditPrice { detail.append("or \(creditPrice) credits") }
            if let date = product.publicationDate { detail.append("published \(date)") }
            if let months = product.periodMonths { detail.append("\(months)-month period") }
            if let content = product.content {
                detail.append("\(content.format.rawValue) \(ByteCount.text(content.size))")
            }
            if product.forSale == false { detail.append("off sale") }
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
