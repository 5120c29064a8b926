import ArgumentParser
import Foundation
import KioskCommandLine
import KioskCore

extension Kiosk {
    struct Subscriptions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the account's subscriptions: active until, auto-renew, grace, billing retry, expired and why.",
            discussion: "Example: kiosk subscriptions --json"
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Print the store's answer as JSON: {subscriptions: [...], now}.")
        var json = false

        func run() async throws {
            try await reportingErrors {
                let client = try await DownloadRunner.connect(options)
                let list = try await client.subscriptions() ?? SubscriptionList(subscriptions: [], now: Date())
                if json {
                    Swift.print(String(decoding: try JSONEncoder.kiosk.encode(list), as: UTF8.self))
                    return
                }
                if list.subscriptions.isEmpty { Swift.print("no subscriptions"); return }
                for subscription in list.subscriptions {
                    Swift.print(Self.line(subscription))
                }
            }
        }

        /// `sub_… com.kiosk…monthly  active until 2026-12-24, auto-renew on`.
        static func line(_ s: SubscriptionInfo) -> String {
            let day = { (date: Date) in SubscriptionCoverage.day(date) }
            let state = switch s.state {
            case .active: "active until \(day(s.expiresDate)), auto-renew \(s.autoRenew ? "on" : "off (ends then)")"
            case .gracePeriod: "in grace until \(s.gracePeriodExpiresDate.map(day) ?? "?"): the renewal failed, next try \(s.nextRetryDate.map(day) ?? "?")"
            case .billingRetry: "in billing retry (no access): the renewal failed, next try \(s.nextRetryDate.map(day) ?? "?")"
            case .expired: "expired \(day(s.expiresDate)) (\(Self.reason(s.expirationReason)))"
            }
            let renewsAs = s.renewsAs.map { ", renews as \($0)" } ?? ""
            return "\(s.originalTransactionId)  \(s.productId)  \(state)\(renewsAs)"
        }

        static func reason(_ reason: SubscriptionExpirationReason?) -> String {
            switch reason {
            case .voluntary: "auto-renew was off"
            case .billingError: "every charge attempt failed"
            case .productRemoved: "the product left the catalog"
            case .revoked: "its period was refunded or revoked"
            case nil: "unknown"
            }
        }
    }

    struct Subscription: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Turn a subscription's auto-renew off (cancel) or back on (resume), or change its plan.",
            discussion: "Example: kiosk subscription cancel txn_0a1b…  (the ID kiosk subscriptions lists)",
            subcommands: [Cancel.self, Resume.self, Change.self]
        )

        struct Change: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Move to another plan of the subscription's group: an upgrade at once (the unused part credited), a downgrade at the renewal.",
                discussion: "Example: kiosk subscription change txn_0a1b… --to com.example.weekly.yearly  (the running plan undoes a change that waits)")
            @OptionGroup var options: ClientOptions
            @Argument(help: "The subscription's ID (its original transaction ID), or a plan of its group.") var id: String
            @Option(help: "The plan to move to (kiosk products lists a group's plans).") var to: String
            func run() async throws {
                try await reportingErrors {
                    let (changed, _) = try await options.client().changePlan(id, to: to)
                    Swift.print(changed.message)
                    Swift.print(Subscriptions.line(changed.subscription))
                }
            }
        }

        struct Cancel: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Auto-renew off: the subscription ends at its period's end.")
            @OptionGroup var options: ClientOptions
            @Argument(help: "The subscription's ID (its original transaction ID).") var id: String
            func run() async throws {
                try await reportingErrors {
                    let info = try await options.client().setAutoRenew(id, on: false)
                    Swift.print(Subscriptions.line(info))
                }
            }
        }

        struct Resume: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Auto-renew on again: the subscription renews at its period's end.")
            @OptionGroup var options: ClientOptions
            @Argument(help: "The subscription's ID (its original transaction ID).") var id: String
            func run() async throws {
                try await reportingErrors {
                    let info = try await options.client().setAutoRenew(id, on: true)
                    Swift.print(Subscriptions.line(info))
                }
            }
        }
    }
}
