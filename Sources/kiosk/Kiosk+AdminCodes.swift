import ArgumentParser
import Foundation
import KioskCommandLine
import KioskCore

extension Kiosk.Admin {
    /// `kiosk admin codes create|list|revoke`: offer codes.
    struct Codes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Offer codes: each gives a product free (kiosk redeem-code, /account), or takes money off it or gives a subscription's introductory offer when buying (kiosk buy --code); kept hashed.",
            discussion: "Example: kiosk admin codes create --product com.kiosk.books.river-of-maps --count 100 --expires 2026-12-31 > codes.csv",
            subcommands: [List.self, Create.self, Revoke.self], defaultSubcommand: List.self)

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every batch, newest first, with how many were redeemed (never the codes).")
            @OptionGroup var options: Kiosk.Admin.Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminCodeBatchRow].self, "/v1/admin/codes")) { row in
                        let state = row.revokedAt != nil ? "withdrawn" : row.expiresAt.map { "until \(ListFilter.shown($0))" } ?? "no end"
                        let gives = (row.benefit ?? .free).described(currency: "")
                        return TerminalText.escaped("\(row.batch)  \(row.productId)  \(row.kind)  \(gives)  \(row.codes) codes  \(row.redeemed) of \(row.limit) redeemed  \(state)")
                    }
                }
            }
        }

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Make one-time codes (--count, printed as CSV: code,product,expires) or one custom code (--code and --limit).",
                discussion: "The codes are printed this once: the store keeps only their hashes. Example: kiosk admin codes create --product com.kiosk.magazines.harbor-monthly.subscription.monthly --code HARBOR2026 --limit 500")
            @OptionGroup var options: Kiosk.Admin.Options
            @Option(help: "The product each code gives.") var product: String
            @Option(help: "How many one-time codes (1 to 10000).") var count: Int?
            @Option(help: "A custom code's text (4 to 32 letters and digits).") var code: String?
            @Option(help: "How many accounts may redeem the custom code.") var limit: Int?
            @Option(help: ArgumentHelp("The last day a code may be redeemed (yyyy-MM-dd, through its end in UTC).", valueName: "date")) var expires: String?
            @Option(help: "Each code takes this percentage off the price (1 to 99), used with kiosk buy --code.") var percentOff: Int?
            @Option(help: ArgumentHelp("Each code takes this amount off the price (in the product's currency, such as 1.50).", valueName: "amount")) var amountOff: String?
            @Flag(help: "Each code gives the subscription's introductory offer, even to a reader who had one.") var introductoryOffer = false

            /// What the options ask each code to give.
            func benefit() throws -> CodeBenefit {
                switch (percentOff, amountOff, introductoryOffer) {
                case (nil, nil, false): return .free
                case (let percent?, nil, false): return .percentOff(percent)
                case (nil, let amount?, false):
                    guard let cents = Price.cents(amount) else { throw ValidationError("--amount-off \(amount) is not an amount like 1.50") }
                    return .amountOff(cents)
                case (nil, nil, true): return .introductoryOffer
                default: throw ValidationError("give at most one of --percent-off, --amount-off and --introductory-offer")
                }
            }

            func validate() throws {
                guard (count == nil) != (code == nil) else { throw ValidationError("give --count (one-time codes) or --code with --limit (one custom code)") }
                if code != nil, limit == nil { throw ValidationError("--code needs --limit: how many accounts may redeem it") }
                if let expires, CodeExpiry.endOfDay(expires) == nil { throw ValidationError("--expires \(expires) is not a date like 2026-12-31") }
                _ = try benefit()
            }

            func run() async throws {
                try await reportingErrors {
                    let request = AdminCodesRequest(productId: product, count: count, code: code, limit: limit, expiresAt: expires.flatMap(CodeExpiry.endOfDay),
                                                    benefit: try benefit())
                    let body = String(decoding: try JSONEncoder.kiosk.encode(request), as: UTF8.self)
                    let made = try options.decode(AdminCodesCreated.self, from: try await options.call("POST", "/v1/admin/codes", body: body), path: "/v1/admin/codes")
                    try options.show(made) {
                        let end = expires ?? ""
                        return (["code,product,expires"] + made.codes.map { "\($0),\(made.productId),\(end)" }).joined(separator: "\n")
                    }
                    FileHandle.standardError.write(Data("batch \(made.batch): \(made.codes.count) code\(made.codes.count == 1 ? "" : "s") for \(made.productId); shown this once\n".utf8))
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Withdraw a batch's codes not yet redeemed (what was redeemed stays the reader's).",
                                                            discussion: "Example: kiosk admin codes revoke batch_3f9a0c1d2e4b")
            @OptionGroup var options: Kiosk.Admin.Options
            @Argument(help: "The batch (kiosk admin codes lists them).") var batch: String
            func run() async throws {
                try await reportingErrors {
                    struct Revoked: Codable { var batch: String; var withdrawn: Int }
                    let path = "/v1/admin/codes/\(PathSegment.encode(batch))/revoke"
                    let answer = try options.decode(Revoked.self, from: try await options.call("POST", path), path: path)
                    try options.show(answer) { TerminalText.escaped("\(answer.batch): \(answer.withdrawn) codes withdrawn") }
                }
            }
        }
    }
}
