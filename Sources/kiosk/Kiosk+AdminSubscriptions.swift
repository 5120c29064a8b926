import ArgumentParser
import Foundation
import KioskCommandLine
import KioskCore

extension Kiosk.Admin {
    /// `kiosk admin sandbox ACCOUNT [--renewals fail|succeed] [--advance 31d]`.
    struct Sandbox: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A sandbox account's renewals (succeed or fail) and clock (moved forward).",
            discussion: "Example: kiosk admin sandbox acct_3f9a… --renewals fail --advance 31d   (a production store refuses it)")
        @OptionGroup var options: Kiosk.Admin.Options
        @Argument(help: "The account ID.") var account: String
        @Option(help: "Whether the account's renewals are charged: succeed or fail.") var renewals: SandboxAccountSettings.RenewalOutcome?
        @Option(help: ArgumentHelp("Move the account's clock forward: 90s, 45m, 12h, 31d.", valueName: "duration")) var advance: String?

        func validate() throws {
            if let advance, Self.seconds(advance) == nil {
                throw ValidationError("--advance \(advance) is not a duration like 90s, 45m, 12h or 31d")
            }
        }

        static func seconds(_ text: String) -> Double? {
            guard let unit = text.last, let value = Double(text.dropLast()), value >= 0 else { return nil }
            switch unit {
            case "s": return value
            case "m": return value * 60
            case "h": return value * 3_600
            case "d": return value * 86_400
            default: return nil
            }
        }

        func run() async throws {
            try await reportingErrors {
                let settings = SandboxAccountSettings(renewals: renewals, advanceSeconds: advance.flatMap(Self.seconds))
                let path = "/v1/admin/accounts/\(PathSegment.encode(account))/sandbox"
                let data = try await options.call("POST", path, body: String(decoding: try JSONEncoder.kiosk.encode(settings), as: UTF8.self))
                let state = try options.decode(SandboxAccountState.self, from: data, path: path)
                try options.show(state) {
                    "account \(state.accountId): renewals \(state.renewals.rawValue), clock \(Int(state.clockOffsetSeconds / 86_400)) days ahead, its time now \(state.now.formatted(.iso8601))"
                }
            }
        }
    }

    /// `kiosk admin renewals`: one renewal pass now.
    struct Renewals: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run one renewal pass now (every instance runs one each second anyway).", discussion: "Example: kiosk admin renewals")
        @OptionGroup var options: Kiosk.Admin.Options
        func run() async throws {
            try await reportingErrors {
                let answer = try options.decode([String: Int].self, from: try await options.call("POST", "/v1/admin/renewals/run"), path: "/v1/admin/renewals/run")
                try options.show(answer) { "\(answer["steps"] ?? 0) renewal steps committed" }
            }
        }
    }

    /// `kiosk admin webhooks add URL`, `list`, `remove NUMBER|URL`.
    struct Webhooks: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The publisher's endpoints every notification is POSTed to (signed, like App Store Server Notifications V2).",
            discussion: "Example: kiosk admin webhooks add https://backend.example.com/kiosk-notifications",
            subcommands: [List.self, Add.self, Remove.self], defaultSubcommand: List.self)

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List the endpoints.")
            @OptionGroup var options: Kiosk.Admin.Options
            func run() async throws {
                try await reportingErrors {
                    try options.show(rows: try await options.get([AdminWebhookRow].self, "/v1/admin/webhooks")) { "\($0.id)  \($0.url)" }
                }
            }
        }

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Add an endpoint: every notification from now on is sent to it.")
            @OptionGroup var options: Kiosk.Admin.Options
            @Argument(help: "The endpoint's http:// or https:// URL.") var url: String
            func run() async throws {
                try await reportingErrors {
                    let body = String(decoding: try JSONEncoder().encode(AdminWebhookRequest(url: url)), as: UTF8.self)
                    let row = try options.decode(AdminWebhookRow.self, from: try await options.call("POST", "/v1/admin/webhooks", body: body), path: "/v1/admin/webhooks")
                    try options.show(row) { "added \(row.url)" }
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove an endpoint; what it was not yet sent is dropped.")
            @OptionGroup var options: Kiosk.Admin.Options
            @Argument(help: "The endpoint's number or URL, as `kiosk admin webhooks list` shows them.") var endpoint: String
            func run() async throws {
                try await reportingErrors {
                    var url = endpoint
                    if let number = Int64(endpoint) {
                        let rows = try await options.get([AdminWebhookRow].self, "/v1/admin/webhooks")
                        guard let row = rows.first(where: { $0.id == number }) else {
                            throw ValidationError("no endpoint is number \(number); kiosk admin webhooks list shows them")
                        }
                        url = row.url
                    }
                    let body = String(decoding: try JSONEncoder().encode(AdminWebhookRequest(url: url)), as: UTF8.self)
                    let row = try options.decode(AdminWebhookRow.self, from: try await options.call("DELETE", "/v1/admin/webhooks", body: body), path: "/v1/admin/webhooks")
                    try options.show(row) { "removed \(row.url)" }
                }
            }
        }
    }

    /// `kiosk admin notifications [--failed]`, `resend ID`, `test`.
    struct Notifications: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Notifications sent to the endpoints: state and attempts; resend one; send a test.",
            discussion: "Example: kiosk admin notifications --failed",
            subcommands: [List.self, Resend.self, Test.self], defaultSubcommand: List.self)

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "List deliveries, newest first.")
            @OptionGroup var options: Kiosk.Admin.Options
            @Flag(help: "Only those not delivered: given up, or failing and being retried.") var failed = false
            func run() async throws {
                try await reportingErrors {
                    let rows = try await options.get([AdminNotificationRow].self, "/v1/admin/notifications\(failed ? "?failed=true" : "")")
                    try options.show(rows: rows) { Notifications.line($0) }
                }
            }
        }

        struct Resend: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Send a notification again to every endpoint.")
            @OptionGroup var options: Kiosk.Admin.Options
            @Argument(help: "The notificationUUID.") var id: String
            func run() async throws {
                try await reportingErrors {
                    let path = "/v1/admin/notifications/\(PathSegment.encode(id))/resend"
                    let rows = try options.decode([AdminNotificationRow].self, from: try await options.call("POST", path), path: path)
                    try options.show(rows: rows) { Notifications.line($0) }
                }
            }
        }

        struct Test: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Send a TEST notification to every endpoint.")
            @OptionGroup var options: Kiosk.Admin.Options
            func run() async throws {
                try await reportingErrors {
                    let path = "/v1/admin/notifications/test"
                    let answer = try options.decode([String: String].self, from: try await options.call("POST", path), path: path)
                    try options.show(answer) { "test notification \(answer["notificationUUID"] ?? "") queued; kiosk admin notifications shows its delivery" }
                }
            }
        }

        static func line(_ row: AdminNotificationRow) -> String {
            let type = row.subtype.map { "\(row.type)/\($0)" } ?? row.type
            let outcome = row.lastStatus.map { "last \($0)" } ?? row.lastError ?? ""
            return "\(row.notificationId)  \(type)  \(row.accountId.isEmpty ? "-" : row.accountId)  \(row.url)  \(row.state)  attempts \(row.attempts)  \(outcome)"
        }
    }
}

extension SandboxAccountSettings.RenewalOutcome: ExpressibleByArgument {}
