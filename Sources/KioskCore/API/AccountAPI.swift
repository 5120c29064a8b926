import Foundation

// The wire of accounts people sign in to (issue 46): sign-ins, devices and device codes.

/// `POST /v1/accounts` may carry a sign-in; without a body it makes an anonymous account, as before.
/// `PUT /v1/account/sign-in` gives an anonymous account (the bearer's) a sign-in.
public struct SignInDetails: Codable, Sendable {
    public var email: String
    public var password: String
    /// The name the device chose for itself (`kiosk devices` shows it); the store names it when empty.
    public var deviceName: String?

    public init(email: String, password: String, deviceName: String? = nil) {
        self.email = email
        self.password = password
        self.deviceName = deviceName
    }
}

/// `POST /v1/sessions`: signs a device in with an email and a password.
public struct SignInRequest: Codable, Sendable {
    public var email: String
    public var password: String
    public var deviceName: String?
    /// At the account's device limit: the ID or name of a device to remove in the same step.
    public var replacing: String?

    public init(email: String, password: String, deviceName: String? = nil, replacing: String? = nil) {
        self.email = email
        self.password = password
        self.deviceName = deviceName
        self.replacing = replacing
    }
}

/// A signed-in device's own token: the answer to a sign-in, a new account and a device code's
/// approval. The token is shown once; the store keeps only its hash.
public struct DeviceSignIn: Codable, Sendable {
    public var accountId: String
    public var deviceId: String
    public var token: String
    /// The account's sign-in email, when it has one.
    public var email: String?

    public init(accountId: String, deviceId: String, token: String, email: String?) {
        self.accountId = accountId
        self.deviceId = deviceId
        self.token = token
        self.email = email
    }
}

/// One device of an account, as `GET /v1/devices` lists it.
public struct DeviceInfo: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var createdAt: Date
    /// When the store last saw a request of it (to the hour: it is not written on every request).
    public var lastSeenAt: Date
    /// The device that asked.
    public var current: Bool
    /// `app`, `web` (the account page in a browser) or `sync` (a reading app's progress sync,
    /// which is not counted in the device limit); nil from a store before it said.
    public var kind: String?

    public init(id: String, name: String, createdAt: Date, lastSeenAt: Date, current: Bool, kind: String? = nil) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
        self.current = current
        self.kind = kind
    }

    /// Whether it counts against the account's device limit (a sync password does not).
    public var countsAsDevice: Bool { kind != "sync" }
}

/// `GET /v1/devices`.
public struct DeviceList: Codable, Sendable {
    public var devices: [DeviceInfo]
    /// How many devices the account may have.
    public var limit: Int
    /// The account's sign-in email; nil for an anonymous account.
    public var email: String?

    public init(devices: [DeviceInfo], limit: Int, email: String?) {
        self.devices = devices
        self.limit = limit
        self.email = email
    }
}

/// `POST /v1/device-codes` (RFC 8628's device authorization request, in Kiosk's JSON).
public struct DeviceCodeRequest: Codable, Sendable {
    public var deviceName: String?

    public init(deviceName: String?) {
        self.deviceName = deviceName
    }
}

/// The answer to ``DeviceCodeRequest``: the device keeps `deviceCode` secret and polls with it;
/// the person enters `userCode` on a signed-in device or on the account page at `verificationUri`.
public struct DeviceCodeGrant: Codable, Sendable {
    public var deviceCode: String
    public var userCode: String
    public var verificationUri: String
    /// Seconds until both codes expire.
    public var expiresIn: Int
    /// Seconds the device waits between polls.
    public var interval: Int

    public init(deviceCode: String, userCode: String, verificationUri: String, expiresIn: Int, interval: Int) {
        self.deviceCode = deviceCode
        self.userCode = userCode
        self.verificationUri = verificationUri
        self.expiresIn = expiresIn
        self.interval = interval
    }
}

/// `POST /v1/device-codes/token`: the device's poll. Until the code is approved the answer is
/// 400 `authorization_pending` (or `slow_down`, `expired_token`); then one ``DeviceSignIn``, once.
public struct DeviceCodeTokenRequest: Codable, Sendable {
    public var deviceCode: String

    public init(deviceCode: String) {
        self.deviceCode = deviceCode
    }
}

/// `POST /v1/device-codes/approve`: a signed-in device approves a code for its account.
public struct DeviceCodeApproval: Codable, Sendable {
    public var userCode: String

    public init(userCode: String) {
        self.userCode = userCode
    }
}

/// The answer to an approval: which device will be signed in.
public struct DeviceCodeApproved: Codable, Sendable {
    public var deviceName: String

    public init(deviceName: String) {
        self.deviceName = deviceName
    }
}

/// One action on an account kept in its audit list: what the operator did (disabled, enabled, a
/// reset code given) and what the holder did that the operator may be asked about (a password
/// reset, the deletion).
public struct AccountAuditEntry: Codable, Sendable, Equatable {
    public var at: Date
    /// `disabled`, `enabled`, `reset_code_issued`, `password_reset`, `deleted`.
    public var action: String
    /// Who: `operator` or `holder`.
    public var actor: String
    public var detail: String

    public init(at: Date, action: String, actor: String, detail: String) {
        self.at = at
        self.action = action
        self.actor = actor
        self.detail = detail
    }
}

/// `GET /v1/account/export`: everything the store holds about the account, in one document.
public struct AccountExport: Codable, Sendable {
    public struct Account: Codable, Sendable {
        public var id: String
        public var createdAt: Date
        public var credits: Int
        public var disabled: Bool

        public init(id: String, createdAt: Date, credits: Int, disabled: Bool) {
            self.id = id
            self.createdAt = createdAt
            self.credits = credits
            self.disabled = disabled
        }
    }

    public struct SignIn: Codable, Sendable {
        public var email: String
        public var createdAt: Date
        public var passwordChangedAt: Date
        /// The password itself is never kept; a bcrypt hash of it is, and is not exported.
        public var password: String

        public init(email: String, createdAt: Date, passwordChangedAt: Date) {
            self.email = email
            self.createdAt = createdAt
            self.passwordChangedAt = passwordChangedAt
            password = "not kept; only a bcrypt hash of it, which is not exported"
        }
    }

    public struct LedgerLine: Codable, Sendable {
        public var transactionId: String
        public var kind: String
        public var amountCents: Int
        public var currency: String
        public var createdAt: Date

        public init(transactionId: String, kind: String, amountCents: Int, currency: String, createdAt: Date) {
            self.transactionId = transactionId
            self.kind = kind
            self.amountCents = amountCents
            self.currency = currency
            self.createdAt = createdAt
        }
    }

    public var exportedAt: Date
    public var account: Account
    public var signIn: SignIn?
    public var devices: [DeviceInfo]
    public var transactions: [StoreTransaction]
    public var subscriptions: SubscriptionList
    public var ledger: [LedgerLine]
    public var audit: [AccountAuditEntry]

    public init(exportedAt: Date, account: Account, signIn: SignIn?, devices: [DeviceInfo], transactions: [StoreTransaction],
                subscriptions: SubscriptionList, ledger: [LedgerLine], audit: [AccountAuditEntry]) {
        self.exportedAt = exportedAt
        self.account = account
        self.signIn = signIn
        self.devices = devices
        self.transactions = transactions
        self.subscriptions = subscriptions
        self.ledger = ledger
        self.audit = audit
    }
}

/// `DELETE /v1/account`: what was erased and what the store keeps, unlinked from the person.
public struct AccountDeleted: Codable, Sendable {
    public var accountId: String
    public var erased: [String]
    public var kept: [String]

    public init(accountId: String, erased: [String], kept: [String]) {
        self.accountId = accountId
        self.erased = erased
        self.kept = kept
    }
}

/// `POST /v1/account/password-reset`: a new password with the one-time code the operator gave.
/// Every device of the account is signed out; this one gets a token (a ``DeviceSignIn``).
public struct PasswordResetRequest: Codable, Sendable {
    public var email: String
    public var code: String
    public var password: String
    public var deviceName: String?

    public init(email: String, code: String, password: String, deviceName: String?) {
        self.email = email
        self.code = code
        self.password = password
        self.deviceName = deviceName
    }
}

/// `POST /v1/admin/accounts/{id}/reset-code`: a one-time code for the holder, shown once.
public struct ResetCodeIssued: Codable, Sendable {
    public var accountId: String
    public var email: String
    public var code: String
    public var expiresAt: Date

    public init(accountId: String, email: String, code: String, expiresAt: Date) {
        self.accountId = accountId
        self.email = email
        self.code = code
        self.expiresAt = expiresAt
    }
}

/// `POST /v1/account/password-reset-request`: mail a reset link to this address, if an account
/// signs in with it. The answer (202) is the same either way.
public struct PasswordResetMailRequest: Codable, Sendable {
    public var email: String
    public init(email: String) { self.email = email }
}

/// `POST /v1/account/email-confirmation`: the token a confirmation link carried.
public struct EmailConfirmation: Codable, Sendable {
    public var token: String
    public init(token: String) { self.token = token }
}

/// `PUT /v1/account/mail`: which of the store's optional messages the account wants.
public struct MailPreferences: Codable, Sendable, Equatable {
    /// A message when a new issue of a series the account subscribes to is out.
    public var newIssues: Bool
    public init(newIssues: Bool) { self.newIssues = newIssues }
}
