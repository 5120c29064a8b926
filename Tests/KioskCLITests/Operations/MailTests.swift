import Foundation
import KioskCore
import KioskTestSupport
import Testing

/// The store's mail (issue 66), read back from a real SMTP server (aiosmtpd, scripts/smtp_sink.py):
/// an address confirmed by its link, a receipt per purchase, a reset link asked for by email and
/// used once, the same answer for an unknown address, a new issue announced to an opted-in
/// subscriber, and a mail server that is down delaying mail and losing none.
@Suite("The store's mail, read back from a real SMTP server")
struct MailTests {
    /// aiosmtpd, writing each message it receives as a file; started and stopped by PID.
    final class SMTPSink: @unchecked Sendable {
        let folder: URL
        let server: ScriptServer
        var port: Int { server.port }

        init(folder: URL, port: Int? = nil) throws {
            self.folder = folder
            server = try ScriptServer("smtp_sink.py", [folder.path] + (port.map { ["--port", String($0)] } ?? []), library: "aiosmtpd")
        }

        func stop() { server.stop() }

        /// The messages received so far, oldest first: their recipient, subject and body.
        func messages() -> [(to: String, subject: String, body: String)] {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".eml") }.sorted()
            return names.compactMap { name in
                guard let text = try? String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8),
                      let rcpt = try? String(contentsOf: folder.appendingPathComponent(name.replacingOccurrences(of: ".eml", with: ".rcpt")), encoding: .utf8)
                else { return nil }
                let parts = text.components(separatedBy: "\r\n\r\n")
                let subject = parts[0].components(separatedBy: "\r\n").first { $0.hasPrefix("Subject: ") }.map { String($0.dropFirst(9)) } ?? ""
                return (rcpt.trimmingCharacters(in: .whitespacesAndNewlines), subject, parts.dropFirst().joined(separator: "\r\n\r\n"))
            }
        }

        /// Waits (a bounded number of looks, not a time that decides) for the `count`th message.
        func waitFor(_ count: Int, _ what: String) async throws -> (to: String, subject: String, body: String) {
            for _ in 0..<400 {
                let received = messages()
                if received.count >= count { return received[count - 1] }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw TestServiceError("no message \(count) (\(what)) reached the SMTP server; it holds \(messages().map(\.subject))")
        }
    }

    static func value(after label: String, in body: String) -> String? {
        guard let range = body.range(of: label) else { return nil }
        return body[range.upperBound...].split(whereSeparator: { $0.isNewline || $0 == " " }).first.map(String.init)
    }

    @Test("sign-up's confirmation link, a receipt, a reset link used once, an unknown address answered the same, a new issue announced; with the SMTP server down, mail waits and is then delivered")
    func mailFlows() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        var sink = try SMTPSink(folder: directory.path("mailbox"))
        defer { sink.stop() }
        let server = try await ServerProcess.start(store, extraArguments: [
            "--smtp-url", "smtp://127.0.0.1:\(sink.port)", "--mail-from", "store@example.com", "--public-url", "https://books.example.com",
            "--mail-interval", "0.1", "--mail-retry", "0.2",
        ], log: directory.path("server.log"))
        let home = ["KIOSK_HOME": directory.path("home").path, "KIOSK_SERVER": server.url]
        let http = StoreHTTP(baseURL: server.url)

        // Sign-up: a confirmation link, confirmed once.
        let created = try await KioskCommand.run(["account", "create", "--email", "ann@example.com", "--password-stdin"], environment: home, input: "correct horse battery\n")
        #expect(created.status == 0, "\(created.stderr)")
        let confirmation = try await sink.waitFor(1, "the address confirmation")
        #expect(confirmation.to == "<ann@example.com>" || confirmation.to == "ann@example.com", "\(confirmation.to)")
        #expect(confirmation.subject.hasPrefix("Confirm your address"), "\(confirmation.subject)")
        let link = try #require(Self.value(after: "Confirm it, to receive receipts and reminders:\r\n", in: confirmation.body))
        #expect(link.hasPrefix("https://books.example.com/account/confirm?token="), "\(link)")
        let token = String(link.split(separator: "=").last ?? "")
        let confirmed = try await http.send("POST", "/v1/account/email-confirmation", json: #"{"token": "\#(token)"}"#)
        #expect(confirmed.status == 200, "\(String(decoding: confirmed.body, as: UTF8.self))")
        #expect(try await http.send("POST", "/v1/account/email-confirmation", json: #"{"token": "\#(token)"}"#).status == 400, "a link confirms once")

        // A purchase: its receipt.
        #expect(try await KioskCommand.run(["buy", "com.kiosk.books.small-engines"], environment: home).status == 0)
        let receipt = try await sink.waitFor(2, "the receipt")
        #expect(receipt.subject == "Your receipt: The Small Engines Handbook" || receipt.subject.hasPrefix("Your receipt: "), "\(receipt.subject)")
        #expect(receipt.body.contains("4.99 USD") && receipt.body.contains("Transaction txn_"), "\(receipt.body)")

        // A reset link: the code works once; an unknown address is answered the same and mailed nothing.
        let forgot = try await KioskCommand.run(["account", "forgot", "--email", "ann@example.com"], environment: home)
        let unknown = try await KioskCommand.run(["account", "forgot", "--email", "nobody@example.com"], environment: home)
        #expect(forgot.status == 0 && unknown.status == 0, "\(forgot.stderr) \(unknown.stderr)")
        #expect(forgot.stdout.replacingOccurrences(of: "ann@example.com", with: "X") == unknown.stdout.replacingOccurrences(of: "nobody@example.com", with: "X"))
        let reset = try await sink.waitFor(3, "the reset link")
        #expect(reset.subject.hasPrefix("Reset your password"), "\(reset.subject)")
        let code = try #require(Self.value(after: "Or with the code ", in: reset.body)).trimmingCharacters(in: .punctuationCharacters)
        #expect(reset.body.contains("https://books.example.com/account/reset?code=\(code)"), "\(reset.body)")
        let again = try await KioskCommand.run(["account", "forgot", "--email", "ann@example.com"], environment: home)
        #expect(again.status == 0)
        let used = try await KioskCommand.run(["account", "reset", "--email", "ann@example.com", "--code", code, "--password-stdin"], environment: home, input: "a new horse battery\n")
        #expect(used.status == 0, "\(used.stderr)")
        let twice = try await KioskCommand.run(["account", "reset", "--email", "ann@example.com", "--code", code, "--password-stdin"], environment: home, input: "a third horse battery\n")
        #expect(twice.status != 0, "a reset code works once: \(twice.stdout)")
        #expect(!sink.messages().contains { $0.to.contains("nobody@example.com") }, "an unknown address is mailed nothing")
        #expect(sink.messages().filter { $0.subject.hasPrefix("Reset your password") }.count == 1, "a second request within the minute mails nothing more")

        // The SMTP server down: the next receipt waits, and goes once it is back.
        let port = sink.port
        sink.stop()
        #expect(try await KioskCommand.run(["buy", "com.kiosk.books.lighthouse-keeper"], environment: home).status == 0)
        for _ in 0..<400 where !server.log.contains("a message could not be sent") { try await Task.sleep(for: .milliseconds(50)) }
        #expect(server.log.contains("a message could not be sent"), "the store tried while the server was down")
        sink = try SMTPSink(folder: directory.path("mailbox"), port: port)
        let late = try await sink.waitFor(4, "the receipt sent after the SMTP server came back")
        #expect(late.subject.hasPrefix("Your receipt: "), "\(late.subject)")

        // New-issue mail, asked for: a subscriber hears of an issue the catalog gains.
        #expect(try await KioskCommand.run(["account", "mail", "--new-issues", "on"], environment: home).status == 0)
        #expect(try await KioskCommand.run(["buy", "com.kiosk.magazines.harbor-monthly.subscription.monthly"], environment: home).status == 0)
        let subscribed = try await sink.waitFor(5, "the subscription's receipt")
        #expect(subscribed.subject.hasPrefix("Your receipt: Harbor Monthly"), "\(subscribed.subject)")
        try store.editHarborMonthly(graceDays: nil, issues: [("issue-04", "2026-12-01")])
        server.signal(SIGHUP)
        let issue = try await sink.waitFor(6, "the new issue")
        #expect(issue.subject == "New issue: Harbor Monthly issue-04", "\(issue.subject)")
        #expect(sink.messages().count == 6, "nothing else was sent: \(sink.messages().map(\.subject))")
        _ = await server.stop()
    }
}
