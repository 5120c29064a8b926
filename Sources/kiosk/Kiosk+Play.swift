import ArgumentParser
import Foundation
import KioskCommandLine
import KioskCore

extension Kiosk {
    struct Play: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "play",
            abstract: "Check Google Play purchases offline.",
            subcommands: [Verify.self]
        )

        struct Verify: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Verify a Google Play purchase and its signature, and print the purchase.",
                discussion: """
                    FILE holds the purchase JSON exactly as Play Billing returned it (Purchase.getOriginalJson()); \
                    --signature the base64 signature it came with (Purchase.getSignature()); --public-key the app's \
                    base64 licensing key from the Play Console (or the same in PEM). Checks RSA PKCS#1 v1.5 with SHA-1 \
                    over the file's exact bytes, then the app's package name. A refused one prints the reason \
                    (signature, format, package, bad_key) and exits 1.

                    Example: kiosk play verify purchase.json --signature purchase.sig --public-key play-key.txt --package com.example.reader
                    """
            )

            @Argument(help: ArgumentHelp("A file holding the purchase JSON, byte for byte as Play returned it.", valueName: "file"))
            var file: String

            @Option(help: ArgumentHelp("A file holding the purchase's base64 signature.", valueName: "file"))
            var signature: String

            @Option(help: ArgumentHelp("A file holding the app's base64 public key from the Play Console (or PEM).", valueName: "file"))
            var publicKey: String

            @Option(help: "The app's package name the purchase must name.")
            var package: String

            @Flag(help: "Print the purchase (or the refusal) as JSON.")
            var json = false

            func run() async throws {
                try await reportingErrors {
                    func read(_ path: String, _ what: String) throws -> Data {
                        guard let data = FileManager.default.contents(atPath: path) else {
                            throw ValidationError("\(what) \(path): cannot be read")
                        }
                        return data
                    }
                    let purchase = try read(file, "the purchase")
                    let signed = String(decoding: try read(signature, "--signature"), as: UTF8.self)
                    let key = String(decoding: try read(publicKey, "--public-key"), as: UTF8.self)
                    do {
                        let verified = try PlayPurchaseVerifier(publicKey: key, packageName: package).verify(json: purchase, signature: signed)
                        let object = try JSONSerialization.jsonObject(with: purchase)
                        let pretty = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
                        if !json {
                            let state = [0: "purchased", 1: "cancelled", 2: "pending"][verified.purchaseState] ?? "state \(verified.purchaseState)"
                            print("verified: Google Play signed this purchase of \(verified.productId) (\(state)) for \(verified.packageName)")
                        }
                        print(String(decoding: pretty, as: UTF8.self))
                    } catch let refusal as PlayPurchaseVerifier.Refusal {
                        if json {
                            try JSONOutput.print(AppStore.Verify.Refusal(verified: false, reason: refusal.code, message: refusal.reason))
                        }
                        throw AppStoreVerifyFailure(message: "refused (\(refusal.code)): \(refusal.reason)")
                    }
                }
            }
        }
    }
}
