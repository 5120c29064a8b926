import ArgumentParser
import Foundation
import KioskCommandLine
import KioskClient
import KioskCore

extension Kiosk {
    struct Download: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Download a product with an App Store or Google Play purchase as proof of purchase.",
            discussion: """
                --app-store-transaction FILE holds the JWS an iOS app gets from StoreKit 2 \
                (Transaction.jwsRepresentation). The download resumes after any cut and, when the store \
                cannot be reached, waits to be retried (kiosk resume, or --wait here), as any download does.

                --play-purchase FILE holds a Google Play purchase's JSON exactly as Play Billing returned it \
                (Purchase.getOriginalJson()) and --play-signature FILE its signature \
                (Purchase.getSignature()). The store checks it and grants it to this device's account as a \
                Kiosk purchase (one a pending purchase waits; another account's is refused); it is then \
                downloaded as any purchase is, and this account's other devices get it too.

                Exit status: 0 installed, 1 refused or failed for good, 3 still waiting.

                Example: kiosk download com.kiosk.books.river-of-maps --app-store-transaction transaction.jws
                Example: kiosk download com.kiosk.books.river-of-maps --play-purchase purchase.json --play-signature purchase.sig
                """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The Kiosk product ID.")
        var product: String

        @Option(help: ArgumentHelp("A file holding the App Store signed transaction (JWS) of the purchase.", valueName: "file"))
        var appStoreTransaction: String?

        @Option(help: ArgumentHelp("A file holding the Google Play purchase's JSON, exactly as Play returned it.", valueName: "file"))
        var playPurchase: String?

        @Option(help: ArgumentHelp("A file holding the Google Play purchase's base64 signature.", valueName: "file"))
        var playSignature: String?

        func validate() throws {
            switch (appStoreTransaction, playPurchase, playSignature) {
            case (_?, nil, nil), (nil, _?, _?): break
            case (nil, nil, nil): throw ValidationError("give the proof of purchase: --app-store-transaction FILE, or --play-purchase FILE with --play-signature FILE")
            case (nil, _, _): throw ValidationError("--play-purchase and --play-signature go together")
            default: throw ValidationError("give one proof of purchase: an App Store transaction or a Play purchase, not both")
            }
        }

        @Flag(help: "Wait for a waiting download and retry it when due.")
        var wait = false

        @Option(help: "With --wait: give up after this many seconds.")
        var maxWait: Int = 3600

        func run() async throws {
            try await reportingErrors {
                if let playPurchase, let playSignature {
                    try await presentPlay(purchaseFile: playPurchase, signatureFile: playSignature)
                    return
                }
                let jws = try AppStoreFile.read(appStoreTransaction ?? "")
                let client = try options.client()
                _ = try client.server()
                let queued = try await client.queueDownload(product, appStoreTransaction: jws)
                if !queued { print("\(product): already installed, queued or running") }
                let runner = DownloadRunner(client: client)
                let product = self.product
                let deadline = wait ? Date().addingTimeInterval(TimeInterval(maxWait)) : nil
                let outcome: WorkOutcome
                if let deadline {
                    let report = try await runner.showingProgress {
                        try await client.resume(until: deadline, step: { step in
                            if case .ran(let round) = step { runner.report(round) }
                        })
                    }
                    outcome = report.outcome
                } else {
                    let report = try await runner.showingProgress { try await client.runDownloads(only: [product]) }
                    runner.report(report)
                    outcome = report.outcome
                }
                try outcome.exit()
            }
        }

        /// The Play purchase presented to the store, granted to this account and installed.
        private func presentPlay(purchaseFile: String, signatureFile: String) async throws {
            // The JSON's bytes are what Play signed: read as they are, not re-encoded.
            guard let json = FileManager.default.contents(atPath: purchaseFile).flatMap({ String(data: $0, encoding: .utf8) }),
                  let signature = FileManager.default.contents(atPath: signatureFile).flatMap({ String(data: $0, encoding: .utf8) }) else {
                throw ValidationError("\(purchaseFile) or \(signatureFile) cannot be read as text; save the purchase's JSON and its signature as Play Billing returned them")
            }
            let client = try await DownloadRunner.connect(options)
            let runner = DownloadRunner(client: client)
            let result = try await runner.showingProgress {
                try await client.presentPlayPurchase(json: json.trimmingCharacters(in: .newlines), signature: signature, for: product)
            }
            let answer = result.answer
            guard answer.state == "granted" else {
                print("\(answer.productId): \(answer.message ?? "the Play purchase is pending")")
                try WorkOutcome.pending.exit()
                return
            }
            guard let purchase = result.purchase else {
                print("\(answer.productId): granted (transaction \(answer.transaction?.transactionId ?? "?")); nothing to download")
                return
            }
            if let message = answer.message { print(message) }
            try runner.report(purchase: purchase)
        }
    }

    struct AppStore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "appstore",
            abstract: "Check App Store signed data offline.",
            subcommands: [Verify.self]
        )

        struct Verify: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Verify an App Store signed transaction (or notification) and print its payload.",
                discussion: """
                    Checks what kiosk serve checks: ES256, the x5c chain to the pinned root at the payload's \
                    signedDate, Apple's OIDs, the signature, and with --bundle-id and --environment the app. \
                    A refused one prints the reason (format, algorithm, chain, oid, expired, signature, bundle, \
                    environment) and exits 1.

                    Example: kiosk appstore verify transaction.jws --bundle-id com.example.reader --environment sandbox
                    """
            )

            @Argument(help: ArgumentHelp("A file holding the JWS (a signed transaction, or a notification's signedPayload or its JSON body).", valueName: "file"))
            var file: String

            @Option(help: ArgumentHelp("A root certificate (DER) instead of Apple Root CA - G3; repeat for several.", valueName: "cert.der"))
            var root: [String] = []

            @Option(help: "The app's bundle ID the payload must name; without it any app's is shown.")
            var bundleId: String?

            @Option(help: "sandbox or production; without it either is shown.")
            var environment: StoreEnvironment?

            @Option(help: "The app's Apple ID, checked on production notifications.")
            var appId: Int64?

            @Flag(help: "Print the payload (or the refusal) as JSON.")
            var json = false

            @Option(name: .customLong("repeat"), help: ArgumentHelp("Verify it this many times with one verifier (its chain cached after the first) and print verifications per second (make bench).", valueName: "n"))
            var times: Int = 1

            func run() async throws {
                try await reportingErrors {
                    var jws = try AppStoreFile.read(file)
                    // A notification's body as Apple posts it.
                    if jws.hasPrefix("{"), let body = try? JSONDecoder().decode([String: String].self, from: Data(jws.utf8)),
                       let signed = body["signedPayload"] {
                        jws = signed
                    }
                    let roots = try root.isEmpty ? [AppStoreRoot.appleRootCAG3] : root.map { path in
                        guard let bytes = FileManager.default.contents(atPath: path) else {
                            throw ValidationError("--root \(path): cannot be read; give a DER certificate file")
                        }
                        return try AppStoreRoot(derEncoded: bytes, source: "--root \(path)")
                    }
                    let payload = AppStoreSignedDataVerifier.unverifiedPayload(of: jws)
                    let isNotification = payload.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }?["notificationUUID"] != nil
                    let verifier = Self.verifier(for: jws, roots: roots, bundleId: bundleId, appId: appId, environment: environment)
                    let refusal = await Self.refusal(of: jws, isNotification: isNotification, by: verifier)
                    if refusal == nil, times > 1 {
                        let clock = ContinuousClock()
                        let start = clock.now
                        for _ in 0..<times {
                            _ = await Self.refusal(of: jws, isNotification: isNotification, by: verifier)
                        }
                        let seconds = Double((clock.now - start).components.attoseconds) / 1e18 + Double((clock.now - start).components.seconds)
                        print("\(times) verifications in \(String(format: "%.3f", seconds)) s: \(Int(Double(times) / seconds)) a second (chain cached)")
                        return
                    }
                    if let refusal {
                        if json {
                            try JSONOutput.print(Refusal(verified: false, reason: refusal.reason, message: refusal.description))
                        }
                        throw AppStoreVerifyFailure(message: "refused (\(refusal.reason)): \(refusal.description)")
                    }
                    guard let payload, let object = try? JSONSerialization.jsonObject(with: payload) else { return }
                    let pretty = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
                    if !json { print("verified: the App Store signed this \(isNotification ? "notification" : "payload")") }
                    print(String(decoding: pretty, as: UTF8.self))
                }
            }

            /// A verifier for the app and environment the flags name, or else those the payload claims.
            static func verifier(for jws: String, roots: [AppStoreRoot], bundleId: String?, appId: Int64?, environment: StoreEnvironment?) -> AppStoreSignedDataVerifier {
                let claimed = AppStoreSignedDataVerifier.unverifiedPayload(of: jws)
                    .flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
                let data = claimed?["data"] as? [String: Any]
                let claimedBundle = (claimed?["bundleId"] ?? data?["bundleId"]) as? String ?? ""
                let claimedEnvironment = (claimed?["environment"] ?? data?["environment"]) as? String
                let environment = environment.map(AppStoreEnvironment.init)
                    ?? claimedEnvironment.flatMap(AppStoreEnvironment.init(rawValue:)) ?? .sandbox
                return AppStoreSignedDataVerifier(configuration: .init(
                    bundleId: bundleId ?? claimedBundle, appAppleId: appId, environment: environment, roots: roots))
            }

            /// Why the payload is refused, or nil when it verifies.
            static func refusal(of jws: String, isNotification: Bool, by verifier: AppStoreSignedDataVerifier) async -> AppStoreRefusal? {
                do {
                    if isNotification {
                        _ = try await verifier.verifyNotification(jws)
                    } else {
                        _ = try await verifier.verifyTransaction(jws)
                    }
                    return nil
                } catch {
                    return error
                }
            }

            struct Refusal: Encodable {
                var verified: Bool
                var reason: String
                var message: String
            }
        }
    }
}

/// A refused App Store payload: exit status 1 with the reason.
struct AppStoreVerifyFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

enum AppStoreFile {
    /// The JWS in `path`, trimmed.
    static func read(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ValidationError("\(path): cannot be read; give the file holding the App Store signed transaction (JWS)")
        }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

extension StoreEnvironment: ExpressibleByArgument {}
