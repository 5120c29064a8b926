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

        @Option(help: ArgumentHelp("Everything the catalog says of one product: its contributors, language, identifiers, subjects, description and content.", valueName: "id"))
        var long: String?

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                if let long {
                    var found: Product?
                    try client.forEachCachedProduct { if $0.id == long { found = $0 } }
                    guard let product = found else { throw ValidationError("\(ProductID.printable(long)) is not in the local catalog; kiosk sync fetches it, kiosk products lists what is") }
                    if json { try JSONOutput.print(product) } else { print(Self.details(of: product)) }
                    return
                }
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
            // A new subscriber's offer, where the price is.
            if let offer = product.offerText { detail.append("new subscribers: \(offer)") }
            if let content = product.content {
                detail.append("\(content.format.rawValue) \(ByteCount.text(content.size))")
            }
            if product.forSale == false { detail.append("off sale") }
            let authors = product.metadata?.authors ?? []
            let by = authors.isEmpty ? "" : " by " + TerminalText.escaped(authors.prefix(3).joined(separator: ", ")) + (authors.count > 3 ? " and others" : "")
            return "  \(product.id)  \(TerminalText.escaped(product.title))\(by)  (\(detail.joined(separator: ", ")))"
        }

        /// One product, field by field (`--long`).
        static func details(of product: Product) -> String {
            var lines = [line(for: product).trimmingCharacters(in: .whitespaces)]
            func add(_ label: String, _ value: String?) {
                if let value, !value.isEmpty { lines.append("  \(label): \(TerminalText.escaped(value))") }
            }
            add("summary", product.summary)
            let metadata = product.metadata ?? PublicationMetadata()
            for role in ["author", "editor", "illustrator", "translator", "narrator"] {
                let names = (metadata.contributors ?? []).filter { $0.role == role }.map(\.name)
                add(names.count > 1 ? role + "s" : role, names.joined(separator: ", "))
            }
            add("publisher", metadata.publisher)
            add("language", metadata.language)
            add("identifiers", metadata.identifiers?.joined(separator: ", "))
            add("subjects", metadata.subjects?.joined(separator: ", "))
            add("pages", metadata.pageCount.map(String.init))
            add("series", product.series.map { series in product.issueNumber.map { "\(series), no. \($0)" } ?? series })
            add("published", product.publicationDate)
            add("description", metadata.description)
            if let content = product.content {
                add("content", "\(content.format.rawValue), \(ByteCount.text(content.size)), SHA-256 \(content.sha256)" + (content.fileName.map { ", as the file \($0)" } ?? ""))
            }
            return lines.joined(separator: "\n")
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
