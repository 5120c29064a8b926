import Foundation
import KioskCore
import KioskStore
import KioskTransfer
import Logging
import Mustache

/// How the store sends its mail (`--smtp-url` and the rest).
public struct MailSettings: Sendable {
    public var server: SMTPServer
    /// The address messages come from, and its name.
    public var from: String
    public var fromName: String
    /// The store's address as readers reach it, for the links a message carries.
    public var publicURL: String
    public var interval: Duration = .seconds(5)
    public var schedule = Mail.Schedule()

    public init(server: SMTPServer, from: String, fromName: String = "Kiosk", publicURL: String) {
        (self.server, self.from, self.fromName) = (server, from, fromName)
        self.publicURL = publicURL.hasSuffix("/") ? String(publicURL.dropLast()) : publicURL
    }
}

/// One pass of the mail worker: the notifications and the catalog turned into messages, then the
/// due messages sent, each with its secret made at that moment (``Accounts/mailedCode(for:)``).
/// Runs on every instance (the outbox's claims make each message go once); an SMTP server that is
/// down leaves the messages waiting for their next attempt, none lost.
struct MailSender: Sendable {
    let store: Store
    let catalog: CatalogService
    let settings: MailSettings
    let templates: MustacheLibrary
    let metrics: ServerMetrics
    let logger: Logger

    func pass() async throws {
        try await store.mail.collect()
        if let products = try? await catalog.storeProducts().products { try await store.mail.announceIssues(products) }
        // A pass sends what it claimed within the claim's lease, on the monotonic clock.
        let deadline = ContinuousClock.now + .seconds(settings.schedule.lease / 2)
        while ContinuousClock.now < deadline {
            let due = try await store.mail.claimDue(settings.schedule)
            if due.isEmpty { break }
            var sentAny = false
            for message in due {
                if try await send(message) { sentAny = true }
            }
            if !sentAny { break }
        }
        let counts = try await store.mail.counts()
        metrics.setMail(pending: counts.pending, failed: counts.failed)
    }

    /// Sends one message; records what happened. Returns whether it went.
    private func send(_ message: Mail.Due) async throws -> Bool {
        let (needed, code) = try await store.accounts.mailedCode(for: message)
        if needed, code == nil {
            // No longer applies (the address changed, or is confirmed): nothing to send.
            try await store.mail.sent(message.id)
            return true
        }
        var values = message.values
        values["store"] = URL(string: settings.publicURL)?.host ?? settings.publicURL
        values["base"] = settings.publicURL
        values["email"] = message.recipient
        if let code {
            values["code"] = code
            let query = code.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed) ?? code
            values["link"] = settings.publicURL + (message.template == .passwordReset ? "/account/reset?code=" : "/account/confirm?token=") + query
        }
        guard let (subject, body) = MailTemplates.render(message.template, values, in: templates) else {
            try await store.mail.failed(message, error: "the template \(message.template.rawValue) did not render", settings.schedule)
            return false
        }
        let host = URL(string: settings.publicURL)?.host ?? "kiosk.invalid"
        let mail = MailMessage(from: settings.from, fromName: settings.fromName, to: message.recipient, subject: subject, body: body,
                               messageId: "<mail-\(message.id)@\(host)>", date: Date())
        let server = settings.server
        do {
            try await Self.offThePool { try SMTPClient.send(mail, via: server) }
        } catch {
            logger.warning("a message could not be sent; it waits for its next attempt", metadata: ["mail": "\(message.id)", "error": "\(error)"])
            try await store.mail.failed(message, error: "\(error)", settings.schedule)
            return false
        }
        try await store.mail.sent(message.id)
        return true
    }

    /// Runs blocking work (libcurl's SMTP) on a thread of its own, not Swift's cooperative pool.
    private static func offThePool(_ body: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            Thread.detachNewThread {
                do { try body(); continuation.resume() } catch { continuation.resume(throwing: error) }
            }
        }
    }
}

extension PeriodicService {
    /// The mail worker (``MailSender``).
    static func mail(_ sender: MailSender, every interval: Duration, logger: Logger) -> PeriodicService {
        PeriodicService(name: "mail", interval: interval, logger: logger) { try await sender.pass() }
    }
}
