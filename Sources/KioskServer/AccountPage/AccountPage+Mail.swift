import Foundation
import Hummingbird
import KioskCore
import KioskStore

/// The account page's forms that mail serves: a reset link asked for and used, an address
/// confirmed, the new-issue messages chosen. Each POST passes the pages' same-origin check.
extension AccountPage {
    @Sendable func forgotPage(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard store.sendsMail else { return refusal(.notFound, StoreError.noMail.message) }
        return html(.ok, "forgot", ["title": "Reset your password"])
    }

    /// The same page whether or not an account signs in with the address.
    @Sendable func forgot(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let form = try await HTMLForm.fields(request)
        let email = form["email"] ?? ""
        try await limits.admitSignIn(request, context: context, email: email)
        try await store.accounts.requestPasswordReset(email: email)
        return html(.ok, "forgot", ["title": "Reset your password", "sent": true,
                                    "notice": "If an account signs in with that address, a message with a link is on its way. The link works for an hour."])
    }

    @Sendable func resetPage(_ request: Request, context: KioskRequestContext) async throws -> Response {
        html(.ok, "reset", ["title": "Set a new password", "code": request.uri.queryParameters.get("code").map { String($0) } ?? ""])
    }

    /// A new password; the browser is signed in to the account with a web session.
    @Sendable func reset(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let form = try await HTMLForm.fields(request)
        let email = form["email"] ?? ""
        do {
            try await limits.admitSignIn(request, context: context, email: email)
            let signedIn = try await store.accounts.resetPassword(
                PasswordResetRequest(email: email, code: form["code"] ?? "", password: form["password"] ?? "", deviceName: "web browser"), kind: .web)
            var response = Response(status: .seeOther, headers: [.location: "/account"])
            response.headers[values: .setCookie].append(sessionCookie(signedIn.token, request: request, seconds: nil))
            return response
        } catch let error as StoreError {
            var page = html(error.status, "reset", ["title": "Set a new password", "email": email, "code": form["code"] ?? "", "error": error.message])
            if let retryAfter = error.retryAfter { page.headers[.retryAfter] = String(retryAfter) }
            return page
        }
    }

    @Sendable func confirmPage(_ request: Request, context: KioskRequestContext) async throws -> Response {
        html(.ok, "confirm", ["title": "Confirm your address", "token": request.uri.queryParameters.get("token").map { String($0) } ?? ""])
    }

    @Sendable func confirm(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let form = try await HTMLForm.fields(request)
        try await limits.admitSignIn(request, context: context, email: "confirmation")
        let email = try await store.accounts.confirmAddress(token: form["token"] ?? "")
        return html(.ok, "confirm", ["title": "Address confirmed", "confirmed": true, "notice": "\(email) is confirmed: receipts and reminders will come to it."])
    }

    /// The account's choice of new-issue messages.
    @Sendable func mailPreferences(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let (device, form) = try await postedForm(request)
        return try await acting(device, request) {
            let on = form["newIssues"] == "on"
            try await store.accounts.setNewIssueMail(on, accountId: device.accountId)
            return on ? "You will be mailed when a new issue of your subscriptions is out." : "No more new-issue messages."
        }
    }
}
