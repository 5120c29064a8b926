import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore

/// Signing in and the account's devices (issue 46): sign-ins with an email and a password, one
/// token per device, the devices listed and removed, and device codes (RFC 8628) for a device
/// without a keyboard. The rules are the store's (``Accounts``); this is their wire.
struct SignInRoutes: Sendable {
    let store: Store
    let limits: RateLimitGate

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.put("v1/account/sign-in", use: addSignIn)
        routes.post("v1/sessions", use: signIn)
        routes.delete("v1/sessions/current", use: signOut)
        routes.get("v1/devices", use: devices)
        routes.delete("v1/devices/:id", use: removeDevice)
        routes.post("v1/device-codes", use: startDeviceCode)
        routes.post("v1/device-codes/token", use: takeDeviceCode)
        routes.post("v1/device-codes/approve", use: approveDeviceCode)
        routes.get("v1/account/export", use: export)
        routes.delete("v1/account", use: deleteAccount)
        routes.post("v1/account/password-reset", use: resetPassword)
        routes.post("v1/account/password-reset-request", use: requestPasswordReset)
        routes.post("v1/account/email-confirmation", use: confirmAddress)
        routes.put("v1/account/mail", use: setMailPreferences)
        return routes
    }

    /// `POST /v1/account/password-reset-request` ``PasswordResetMailRequest``: 202 whether or not
    /// an account signs in with the address (a link is mailed when one does). Limited as sign-ins are.
    @Sendable func requestPasswordReset(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let asked = try await JSONBody.decode(PasswordResetMailRequest.self, from: request)
        try await limits.admitSignIn(request, context: context, email: asked.email)
        try await store.accounts.requestPasswordReset(email: asked.email)
        return try JSONBody.response(["message": "if an account signs in with this address, a message with a link to reset its password is on its way"], status: .accepted)
    }

    /// `POST /v1/account/email-confirmation` ``EmailConfirmation``: confirms the address whose
    /// link carried the token. Limited as sign-ins are (per address; a token is 192 random bits).
    @Sendable func confirmAddress(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let confirmation = try await JSONBody.decode(EmailConfirmation.self, from: request)
        try await limits.admitSignIn(request, context: context, email: "confirmation")
        return try JSONBody.response(["email": try await store.accounts.confirmAddress(token: confirmation.token)])
    }

    /// `PUT /v1/account/mail` ``MailPreferences``: the account's optional messages.
    @Sendable func setMailPreferences(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let preferences = try await JSONBody.decode(MailPreferences.self, from: request)
        try await store.accounts.setNewIssueMail(preferences.newIssues, accountId: context.requireAccount())
        return try JSONBody.response(preferences)
    }

    /// `GET /v1/account/export`: ``AccountExport``, everything the store holds about the account.
    @Sendable func export(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        var export = try await store.accounts.export(device.accountId)
        export.devices = export.devices.map { var info = $0; info.current = info.id == device.deviceId; return info }
        return try JSONBody.response(export)
    }

    /// `DELETE /v1/account` {password} (an anonymous account sends none): erases the account's
    /// personal data; ``AccountDeleted`` says what stays.
    @Sendable func deleteAccount(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let body = try await JSONBody.body(of: request, upTo: 1 << 16)
        let password = body.readableBytes == 0 ? nil : try JSONBody.decode(Confirmation.self, from: Data(buffer: body)).password
        try await limits.admitAccountPassword(request, context: context, accountId: account)
        return try JSONBody.response(try await store.accounts.delete(account, password: password))
    }

    struct Confirmation: Decodable { var password: String? }

    /// `POST /v1/account/password-reset` ``PasswordResetRequest``: a new password with the
    /// operator's one-time code; every device signed out, this one's ``DeviceSignIn``. Limited as sign-ins are.
    @Sendable func resetPassword(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let reset = try await JSONBody.decode(PasswordResetRequest.self, from: request)
        try await limits.admitSignIn(request, context: context, email: reset.email)
        return try JSONBody.response(try await store.accounts.resetPassword(reset), status: .created)
    }

    /// `PUT /v1/account/sign-in` {email, password}: the bearer's anonymous account gains a sign-in
    /// and keeps its purchases and devices.
    @Sendable func addSignIn(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        let details = try await JSONBody.decode(SignInDetails.self, from: request)
        // Limited as sign-ins are: it answers whether an email is taken, and hashes a password.
        try await limits.admitSignIn(request, context: context, email: details.email)
        _ = try await store.accounts.addSignIn(to: device, details)
        // Read after the sign-in committed: the list names its email.
        return try JSONBody.response(try await store.accounts.devices(of: device.accountId, current: device.deviceId))
    }

    /// `POST /v1/sessions` {email, password, deviceName?, replacing?}: this device's own token.
    /// 401 `invalid_credentials` for a wrong email and a wrong password alike; 409 `device_limit`.
    @Sendable func signIn(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let attempt = try await JSONBody.decode(SignInRequest.self, from: request)
        try await limits.admitSignIn(request, context: context, email: attempt.email)
        return try JSONBody.response(try await store.accounts.signIn(attempt), status: .created)
    }

    /// `DELETE /v1/sessions/current`: the asking device signs itself out (`kiosk logout`).
    @Sendable func signOut(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try await store.accounts.signOut(try context.requireDevice())
        return Response(status: .noContent)
    }

    /// `GET /v1/devices`: ``DeviceList``, the asking device marked `current`.
    @Sendable func devices(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        return try JSONBody.response(try await store.accounts.devices(of: device.accountId, current: device.deviceId))
    }

    /// `DELETE /v1/devices/{id or name}[?force=true]`: signs that device out at once; answers the
    /// removed ``DeviceInfo``; `409 last_device` for the last of an account without a sign-in, unless forced.
    @Sendable func removeDevice(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let device = try context.requireDevice()
        let named = try context.parameters.require("id")
        let force = request.uri.queryParameters.get("force") == "true"
        var removed = try await store.accounts.removeDevice(named.removingPercentEncoding ?? named, of: device.accountId, force: force)
        removed.current = removed.id == device.deviceId
        return try JSONBody.response(removed)
    }

    /// `POST /v1/device-codes` {deviceName?}: ``DeviceCodeGrant``; needs no sign-in.
    @Sendable func startDeviceCode(_ request: Request, context: KioskRequestContext) async throws -> Response {
        try await limits.admitDeviceCode(request, context: context, approvingAccount: nil)
        let asked = try await JSONBody.decode(DeviceCodeRequest.self, from: request)
        var grant = try await store.accounts.startDeviceCode(name: asked.deviceName)
        grant.verificationUri = Self.verificationURI(request)
        return try JSONBody.response(grant)
    }

    /// `POST /v1/device-codes/token` {deviceCode}: ``DeviceSignIn`` once approved; 400
    /// `authorization_pending` before, `expired_token` after its time or its one use.
    @Sendable func takeDeviceCode(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let poll = try await JSONBody.decode(DeviceCodeTokenRequest.self, from: request)
        return try JSONBody.response(try await store.accounts.takeDeviceCode(poll.deviceCode))
    }

    /// `POST /v1/device-codes/approve` {userCode}: the asking device's account approves the code.
    @Sendable func approveDeviceCode(_ request: Request, context: KioskRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        try await limits.admitDeviceCode(request, context: context, approvingAccount: account)
        let approval = try await JSONBody.decode(DeviceCodeApproval.self, from: request)
        return try JSONBody.response(try await store.accounts.approveDeviceCode(approval.userCode, for: account))
    }

    /// Where a person approves a code: on a signed-in device with `kiosk devices approve CODE`, or
    /// the account page at this address (the `Host` the device reached, when it is one: ``RequestOrigin``).
    static func verificationURI(_ request: Request) -> String {
        RequestOrigin.base(of: request) + "/account/device"
    }
}
