import ArgumentParser
import Foundation
import KioskClient
import KioskCore
import KioskCommandLine

extension Kiosk {
    struct Progress: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show or set where you are in a book or issue, on every device of the account.",
            discussion: """
                The place is the account's, kept by the store: KOReader's progress sync and OPDS \
                reading apps read and write the same one. With --set, this device says where it \
                is now; a newer place another device said stays, and this says so and exits 1.

                Example: kiosk progress com.kiosk.books.salt-and-stars --set 42%
                """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID (kiosk library lists what is installed).")
        var productId: String

        @Option(help: "Where you are: a percentage, 0% to 100%.")
        var set: String?

        func validate() throws {
            if productId.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("give a product ID (kiosk library lists what is installed)") }
            if let set, Self.fraction(set) == nil { throw ValidationError("--set takes a percentage from 0% to 100% with its percent sign, such as --set 42%") }
        }

        /// "42%" or "42.5%" as a fraction of 1: digits, at most one point, and the percent sign,
        /// which is asked for so that "0.42" is not taken for less than one percent.
        static func fraction(_ text: String) -> Double? {
            guard let match = text.wholeMatch(of: /([0-9]{1,3})(\.[0-9]{1,4})?%/), let value = Double(String(match.1) + String(match.2 ?? "")),
                  (0...100).contains(value) else { return nil }
            return value / 100
        }

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                if let set, let fraction = Self.fraction(set) {
                    let (kept, stored) = try await client.setReadingPosition(of: productId, progression: fraction)
                    guard stored else {
                        // Not done as asked: another device's later place stands.
                        print("\(productId): a newer place stays: \(Self.shown(kept))")
                        throw ExitCode.failure
                    }
                    print("\(productId): at \(Self.shown(kept)) now, on every device")
                } else if let position = try await client.readingPosition(of: productId) {
                    print("\(productId): \(Self.shown(position))")
                } else {
                    print("\(productId): no device has said where you are yet")
                }
            }
        }

        static func shown(_ position: ReadingPosition) -> String {
            "\(Int((position.progression * 100).rounded())) % (\(TerminalText.escaped(position.device.name)), \(position.modified))"
        }
    }
}
