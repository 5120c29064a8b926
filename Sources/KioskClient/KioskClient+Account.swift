import Foundation
import KioskCore

/// What linking this device to an account did (by token, or by signing in).
public struct AccountLink: Sendable {
    /// The linked account, as the store knows it.
    public var summary: AccountSummary
    /// The account this device had before, when it was another one.
    public var replaced: String?
    /// What the replaced account owned: purchases and subscriptions, and credits.
    public var replacedHoldings = 0
    public var replacedCredits = 0
    /// This device was already linked to that account: nothing changed.
    public var alreadyLinked = false
    /// The email the account signs in with, when this device signed in with one.
    public var email: String?
    /// This device's ID at the store, when it signed in.
    public var deviceId: String?
    /// Purchases of this account saved on this device and still unanswered (it was signed out
    /// elsewhere meanwhile): the next replay sends them with the new token and their own keys.
    public var waitingPurchases = 0

    public var accountId: String { summary.accountId }
}

/// This device's account: which one it acts for, signing in and out, and the account's devices.
///
/// A device holds one token of its own (the store keeps only its hash). An anonymous account is
/// made by the first purchase, as before; `createAccount(email:…)` gives it a sign-in, and any
/// other device signs in to it with ``signIn(email:password:deviceName:replacing:force:)`` or a
/// device code (``signInWithCode(deviceName:show:)``), getting a token of its own.
extension KioskClient {
    /// This device's account ID, if it has one yet.
    public func accountID() throws -> String? {
        try database.account.current()?.id
    }

    /// The email this device's account signs in with, as far as this device knows.
    public func accountEmail() throws -> String? {
        try database.account.email()
    }

    /// This device's token, to link another device to an anonymous account.
    public func accountToken() throws -> String? {
        try database.account.current()?.token
    }

    /// Gives this device's account a sign-in, so other devices can sign in to it: an anonymous
    /// account keeps its purchases; with no account yet, one is made with the sign-in.
    /// - Throws: the store's `email_taken`, `has_sign_in` or a refused password, as one line.
    public func createAccount(email: String, password: String, deviceName: String?) async throws -> AccountLink {
        let details = SignInDetails(email: email, password: password, deviceName: deviceName)
        if let api = try await purchases.existingAccountAPI(), let current = try database.account.current() {
            let list = try await api.addSignIn(details)
            try database.account.saveSignedIn(id: current.id, token: current.token, email: list.email, store: try storeServer.base())
            return AccountLink(summary: try await api.account(), email: list.email, deviceId: list.devices.first(where: \.current)?.id)
        }
        var api = try purchases.storeAPI()
        let created = try await api.createAccount(signIn: details)
        try database.account.saveSignedIn(id: created.accountId, token: created.token, email: created.email, store: try storeServer.base())
        api.token = created.token
        return AccountLink(summary: try await api.account(), email: created.email, deviceId: created.deviceId)
    }

    /// Signs this device in to the account of `email`; it gets a token of its own.
    ///
    /// As with ``linkAccount(token:force:)``, an account this device had that owns something is
    /// not left behind unless `force`; a signed-in account it had is signed out at the store.
    /// While a purchase saved here waits unanswered, only its own account may be signed in to: a
    /// device signed out elsewhere signs in again, and the purchase is sent with the new token.
    /// - Parameter replacing: at the account's device limit, the device (ID or name) to remove.
    public func signIn(email: String, password: String, deviceName: String?, replacing: String? = nil, force: Bool = false) async throws -> AccountLink {
        try refuseWhilePurchaseUnanswered(then: "sign in", staying: try knownAccount(signingInWith: email))
        var api = try purchases.storeAPI()
        // What this device would leave is checked before the sign-in makes a device at the store.
        let leaving = try await currentHoldings(force: force)
        // Signing in again to the account it is signed in to: this device's old session makes way
        // for the new one (at the device limit it would otherwise count against itself).
        var replacing = replacing
        if replacing == nil, let leaving, leaving.signedIn, let known = try database.account.email(),
           known == email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased(), var current = try await purchases.existingAccountAPI() {
            current.token = leaving.token
            replacing = try? await current.devices().devices.first(where: \.current)?.id
        }
        let signedIn = try await api.signIn(SignInRequest(email: email, password: password, deviceName: deviceName, replacing: replacing))
        api.token = signedIn.token
        return try await adopt(signedIn, leaving: leaving, api: api)
    }

    /// Signs this device in with a code, as a TV does (RFC 8628): `show` is told the code and
    /// where to approve it (`kiosk devices approve CODE` on a signed-in device), then the store is
    /// polled at its interval until the code is approved, or it expires.
    public func signInWithCode(deviceName: String?, force: Bool = false, show: @Sendable (DeviceCodeGrant) -> Void) async throws -> AccountLink {
        // Which account approves the code is known only once it is taken: ``adopt`` checks it then.
        try refuseWhilePurchaseUnanswered(then: "sign in", staying: try database.account.current()?.id)
        var api = try purchases.storeAPI()
        let leaving = try await currentHoldings(force: force)
        let grant = try await api.startDeviceCode(deviceName: deviceName)
        show(grant)
        var interval = max(1, grant.interval)
        let deadline = ContinuousClock.now + .seconds(grant.expiresIn)
        while true {
            try await Task.sleep(for: .seconds(interval))
            do {
                let signedIn = try await api.takeDeviceCode(grant.deviceCode)
                api.token = signedIn.token
                return try await adopt(signedIn, leaving: leaving, api: api)
            } catch ClientError.serverError(_, _, "authorization_pending", _) where ContinuousClock.now < deadline {
                continue
            } catch ClientError.serverError(_, _, "slow_down", _) where ContinuousClock.now < deadline {
                interval += 5
            }
        }
    }

    /// Signs this device out: its token is revoked at the store, then forgotten here. The library
    /// stays on the disk; signing in again brings the purchases back.
    /// - Throws: when the store cannot be reached (the token would stay valid there: nothing is
    ///   forgotten), or a purchase is still unanswered.
    /// - Parameter force: sign out an anonymous account that owns something all the same (nothing
    ///   could reach it again: it has no sign-in).
    public func signOut(force: Bool = false) async throws -> String? {
        guard let account = try database.account.current(), let api = try await purchases.existingAccountAPI() else { return nil }
        try refuseWhilePurchaseUnanswered(then: "sign out")
        if try database.account.email() == nil, !force {
            let holdings = try await api.account()
            let owned = holdings.owned.count + holdings.subscriptions.count
            if owned > 0 || holdings.credits > 0 {
                throw ClientError.invalidRequest(
                    "this device's account \(account.id) has no sign-in and owns \(owned) purchase(s) and \(holdings.credits) credits, which nothing could reach after signing out; "
                    + "give it a sign-in first (kiosk account create --email EMAIL), or sign out with --force")
            }
        }
        do {
            try await api.signOut()
        } catch ClientError.serverError(_, 401, _, _) {
            // Removed from another device already: nothing left to revoke.
        }
        try database.account.forget()
        return account.id
    }

    /// The account's devices, this one marked.
    public func devices() async throws -> DeviceList {
        guard let api = try await purchases.existingAccountAPI() else {
            throw ClientError.invalidRequest("this device has no account yet; sign in first (kiosk login --email EMAIL)")
        }
        return try await api.devices()
    }

    /// Removes one of the account's devices (its ID or name); it is signed out at once.
    /// - Throws: ``ClientError/invalidRequest(_:)`` when it is this device and a purchase is still
    ///   unanswered, as ``signOut(force:)`` does: this device would forget its account, and the
    ///   purchase could never be sent under it.
    /// - Parameter force: remove the last device of an account without a sign-in all the same
    ///   (the store refuses it otherwise: the account would be lost with what it bought).
    public func removeDevice(_ idOrName: String, force: Bool = false) async throws -> DeviceInfo {
        guard let api = try await purchases.existingAccountAPI() else {
            throw ClientError.invalidRequest("this device has no account yet; sign in first (kiosk login --email EMAIL)")
        }
        if try !unansweredPurchases().isEmpty {
            // Which device the store will remove: the one of that ID, else the only one of that name.
            let devices = try await api.devices().devices
            let named = devices.filter { $0.name == idOrName }
            if (devices.first { $0.id == idOrName } ?? (named.count == 1 ? named.first : nil))?.current == true {
                try refuseWhilePurchaseUnanswered(then: "remove this device")
            }
        }
        let removed = try await api.removeDevice(idOrName, force: force)
        if removed.current { try database.account.forget() }
        return removed
    }

    /// Approves the code another device shows (`kiosk login --code` there) for this account.
    public func approveDeviceCode(_ userCode: String) async throws -> DeviceCodeApproved {
        guard let api = try await purchases.existingAccountAPI() else {
            throw ClientError.invalidRequest("this device has no account to approve a code for; sign in first (kiosk login --email EMAIL)")
        }
        return try await api.approveDeviceCode(userCode)
    }

    /// Everything the store holds about this device's account, as one document.
    public func exportAccount() async throws -> AccountExport {
        guard let api = try await purchases.existingAccountAPI() else {
            throw ClientError.invalidRequest("this device has no account; nothing to export")
        }
        return try await api.exportAccount()
    }

    /// Erases the account's personal data at the store (its ledger stays, unlinked from the
    /// person) and forgets the account here.
    /// - Parameter password: the sign-in's password; nil for an anonymous account.
    /// Asks the store to mail a reset link and code to `email` (the answer is the same whether
    /// or not an account signs in with it). Needs no account on this device.
    public func requestPasswordReset(email: String) async throws {
        try await purchases.storeAPI().requestPasswordReset(email: email)
    }

    /// Turns the account's new-issue mail on or off.
    public func setNewIssueMail(_ on: Bool) async throws -> MailPreferences {
        guard let api = try await purchases.existingAccountAPI() else {
            throw ClientError.invalidRequest("this device has no account; sign in first")
        }
        return try await api.setMailPreferences(MailPreferences(newIssues: on))
    }

    public func deleteAccount(password: String?) async throws -> AccountDeleted {
        guard let api = try await purchases.existingAccountAPI() else {
            throw ClientError.invalidRequest("this device has no account; nothing to delete")
        }
        try refuseWhilePurchaseUnanswered(then: "delete the account")
        let deleted = try await api.deleteAccount(password: password)
        try database.account.forget()
        return deleted
    }

    /// Sets a new password with the one-time code the store's operator gave: every device of the
    /// account is signed out, and this one signed in.
    public func resetPassword(email: String, code: String, password: String, deviceName: String?, force: Bool = false) async throws -> AccountLink {
        try refuseWhilePurchaseUnanswered(then: "reset the password", staying: try knownAccount(signingInWith: email))
        var api = try purchases.storeAPI()
        let leaving = try await currentHoldings(force: force)
        let signedIn = try await api.resetPassword(PasswordResetRequest(email: email, code: code, password: password, deviceName: deviceName))
        api.token = signedIn.token
        return try await adopt(signedIn, leaving: leaving, api: api)
    }

    /// Uses an existing account (from another device) on this one, by its token: for anonymous
    /// accounts. An account with a sign-in is better reached by signing in.
    ///
    /// The account this device had is replaced; when it owns anything (purchases, credits or
    /// subscriptions, as the store knows them) linking is refused unless `force` is true, since
    /// this device would no longer reach them.
    /// - Throws: the server's 401 when the token is not known; ``ClientError/invalidRequest(_:)``
    ///   while a purchase of the current account is still unanswered (unless the token is that
    ///   account's), or when the current account owns something and `force` is false.
    public func linkAccount(token: String, force: Bool = false) async throws -> AccountLink {
        try refuseWhilePurchaseUnanswered(then: "link", staying: try database.account.current()?.id)
        var api = try purchases.storeAPI()
        api.token = token
        let summary = try await api.account()
        // Linking again to the account the waiting purchases were made for is how they get sent.
        try refuseWhilePurchaseUnanswered(then: "link", staying: summary.accountId)
        var link = AccountLink(summary: summary, waitingPurchases: try unansweredPurchases().count)
        if let current = try database.account.current(), current.id == summary.accountId {
            link.alreadyLinked = true
        } else if let leaving = try await currentHoldings(force: force) {
            link.replaced = leaving.accountId
            link.replacedHoldings = leaving.holdings
            link.replacedCredits = leaving.credits
        }
        try database.account.saveSignedIn(id: summary.accountId, token: token, email: nil, store: try storeServer.base())
        try purchases.makeUnansweredDue(account: summary.accountId)
        return link
    }

    // MARK: Switching accounts

    /// The account this device would leave, and what it owns.
    struct Leaving {
        var accountId: String
        var holdings: Int
        var credits: Int
        /// The device's token for it, to sign out at the store when it signs in with an email.
        var token: String
        var signedIn: Bool
    }

    /// The purchases saved on this device that the store has not answered.
    private func unansweredPurchases() throws -> [PaymentRecord] {
        try purchases.unfinished().filter { $0.state == .purchasing }
    }

    /// The account this device has, when `email` is the one it signs in with: signing in with it
    /// again stays on that account.
    private func knownAccount(signingInWith email: String) throws -> String? {
        guard let known = try database.account.email(), known == email.trimmingCharacters(in: .whitespacesAndNewlines).lowercased() else { return nil }
        return try database.account.current()?.id
    }

    /// Refuses to leave the account of a purchase still unanswered: a saved purchase is sent under
    /// its own account only (it may have been charged there), so this device must keep it until
    /// the store answers.
    /// - Parameters:
    ///   - action: what the reader asked for, said as what to do once the purchase is sent.
    ///   - account: the account this device uses after the action, when it stays on one: staying
    ///     on the purchases' own account is allowed (a device signed out elsewhere signs in to it
    ///     again, and the purchases are sent with the new token).
    private func refuseWhilePurchaseUnanswered(then action: String, staying account: String? = nil) throws {
        let waiting = try unansweredPurchases()
        guard !waiting.isEmpty else { return }
        let current = try database.account.current()?.id
        let owners = Set(waiting.map { $0.accountId ?? current })
        if let account, owners == [account] { return }
        let owner = owners.count == 1 ? owners.first.flatMap { $0 }.map { "account \($0)" } : nil
        let products = Set(waiting.map(\.productId)).sorted().joined(separator: ", ")
        var message = "a purchase of \(owner ?? "this device's account") (\(products)) is still unanswered; send it first (kiosk resume) once the server is reachable, then \(action)"
        if owners == [current], let email = try database.account.email() {
            // Signed out elsewhere, `kiosk resume` cannot send it: signing in to that account again does.
            message += "; if this device was signed out, sign in again with kiosk login --email \(email) to send it"
        }
        throw ClientError.invalidRequest(message)
    }

    /// What the current account owns, or a refusal when it owns something and `force` is false.
    private func currentHoldings(force: Bool) async throws -> Leaving? {
        guard let current = try database.account.current(), var api = try await purchases.existingAccountAPI() else { return nil }
        api.token = current.token
        let holdings: AccountSummary
        do {
            holdings = try await api.account()
        } catch ClientError.serverError(_, 401, _, _) {
            // Its device was removed: nothing this device could still reach.
            return nil
        }
        let leaving = Leaving(accountId: current.id, holdings: holdings.owned.count + holdings.subscriptions.count, credits: holdings.credits,
                              token: current.token, signedIn: try database.account.email() != nil)
        if !force, leaving.holdings > 0 || leaving.credits > 0, !leaving.signedIn {
            throw ClientError.invalidRequest(
                "this device's account \(current.id) owns \(leaving.holdings) purchase(s) and \(leaving.credits) credits, which this device would no longer reach; "
                + "give it a sign-in first (kiosk account create --email EMAIL) or keep its token (kiosk account --show-token), then use --force")
        }
        return leaving
    }

    /// Keeps a new sign-in's token; the device's previous signed-in session is signed out at the store.
    private func adopt(_ signedIn: DeviceSignIn, leaving: Leaving?, api: StoreAPI) async throws -> AccountLink {
        do {
            try refuseWhilePurchaseUnanswered(then: "sign in", staying: signedIn.accountId)
        } catch {
            // Another account than the waiting purchases': the device just made there is of no use.
            try? await api.signOut()
            throw error
        }
        try database.account.saveSignedIn(id: signedIn.accountId, token: signedIn.token, email: signedIn.email, store: try storeServer.base())
        try purchases.makeUnansweredDue(account: signedIn.accountId)
        var link = AccountLink(summary: try await api.account(), email: signedIn.email, deviceId: signedIn.deviceId,
                               waitingPurchases: try unansweredPurchases().count)
        if let leaving {
            if leaving.signedIn {
                var old = api
                old.token = leaving.token
                // Its token is of no use to this device any more; one that cannot be revoked now stays listed (kiosk devices).
                try? await old.signOut()
            }
            if leaving.accountId == signedIn.accountId {
                link.alreadyLinked = true
            } else {
                link.replaced = leaving.accountId
                link.replacedHoldings = leaving.holdings
                link.replacedCredits = leaving.credits
            }
        }
        return link
    }
}
