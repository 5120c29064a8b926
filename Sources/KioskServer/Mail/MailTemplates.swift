import Foundation
import KioskStore
import Mustache

/// The store's messages, plain text from swift-mustache templates (`CONTENT_TYPE: TEXT`: a mail is
/// no HTML, so nothing is escaped; header lines are cleaned of line breaks where they are written,
/// ``KioskTransfer/MailMessage``). Each template's first line is its subject.
enum MailTemplates {
    static let sources: [MailTemplate: String] = [
        .passwordReset: """
            {{% CONTENT_TYPE: TEXT}}Reset your password at {{store}}
            Someone (we hope you) asked to reset the password of the account that signs in with {{email}}.

            Set a new one here, within the hour:
            {{link}}

            Or with the code {{code}}, on a device with Kiosk:
            kiosk account reset --email {{email}} --code {{code}}

            Every device signed in to the account is signed out when the password changes.
            If you did not ask, ignore this message: your password stays as it is.
            """,
        .confirmAddress: """
            {{% CONTENT_TYPE: TEXT}}Confirm your address at {{store}}
            This address was given to sign in to an account at {{store}}.

            Confirm it, to receive receipts and reminders:
            {{link}}

            If it was not you, ignore this message: nothing will be sent to you again.
            """,
        .receipt: """
            {{% CONTENT_TYPE: TEXT}}Your receipt: {{title}}
            {{#renewal}}Your subscription renewed{{/renewal}}{{^renewal}}Thank you for your purchase{{/renewal}} at {{store}}.

            {{title}}{{#amount}}: {{amount}}{{/amount}}
            {{#until}}Until {{until}}.
            {{/until}}Transaction {{transactionId}}

            Your library: {{base}}/account/library
            """,
        .renewalFailed: """
            {{% CONTENT_TYPE: TEXT}}Your subscription could not be renewed: {{title}}
            The payment for {{title}} did not go through.

            {{#until}}You keep reading until {{until}} while we try again. {{/until}}Check your payment method in your account:
            {{base}}/account
            """,
        .graceEnded: """
            {{% CONTENT_TYPE: TEXT}}Your subscription has ended: {{title}}
            We could not take the payment for {{title}}, and its grace period is over.

            What you bought stays yours. To subscribe again: {{base}}/products/{{productId}}
            """,
        .newIssue: """
            {{% CONTENT_TYPE: TEXT}}New issue: {{title}}
            A new issue of a magazine you subscribe to is out: {{title}}{{#date}} ({{date}}){{/date}}.

            Read it: {{base}}/account/library

            You asked for these messages; turn them off in your account: {{base}}/account
            """,
    ]

    static func parsed() throws -> MustacheLibrary {
        var library = MustacheLibrary()
        for (template, source) in sources { try library.register(source, named: template.rawValue) }
        return library
    }

    /// The subject (the first line) and the body of `template` rendered with `values`.
    static func render(_ template: MailTemplate, _ values: [String: String], in library: MustacheLibrary) -> (subject: String, body: String)? {
        guard let text = library.render(values, withTemplate: template.rawValue) else { return nil }
        let lines = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        guard let subject = lines.first, !subject.isEmpty else { return nil }
        return (String(subject), lines.count > 1 ? String(lines[1]) : "")
    }
}
