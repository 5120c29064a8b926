import Foundation

// The rows of the store operator's API (`/v1/admin/…`). The server encodes these types and
// `kiosk admin … --json` decodes the same ones, so a field renamed or added on one side is a
// compile error on the other, not a column that silently reads as empty.

/// `GET /v1/admin/accounts`: one row per account.
public struct AdminAccountRow: Codable, Sendable, Equatable {
    public var accountId: String
    public var credits: Int
    public var createdAt: Date
    /// How many transactions the account has, of any status.
    public var transactions: Int
    /// Charges less refunds, in cents.
    public var paidCents: Int
    /// When its latest transaction was made; nil for an account that has made none.
    public var lastTransactionAt: Date?

    public init(accountId: String, credits: Int, createdAt: Date, transactions: Int, paidCents: Int, lastTransactionAt: Date? = nil) {
        self.accountId = accountId
        self.credits = credits
        self.createdAt = createdAt
        self.transactions = transactions
        self.paidCents = paidCents
        self.lastTransactionAt = lastTransactionAt
    }
}

/// A transaction as the operator sees it (`GET /v1/admin/transactions`, `/pending`, and within an account).
public struct AdminTransactionRow: Codable, Sendable, Equatable {
    public var transactionId: String
    public var accountId: String
    public var productId: String
    public var kind: ProductKind
    public var quantity: Int
    public var status: TransactionStatus
    /// `approve`, `decline`, `cancel`, `defer`, `owned` (nothing charged) or `credits`.
    public var paymentMethod: String
    public var amountCents: Int
    public var currency: String
    public var createdAt: Date
    /// Whether the reader's device reported it delivered.
    public var finished: Bool
    public var revokedAt: Date?
    public var revocationReason: String?
    /// Credits it was paid with (a redemption): no money moved, `amountCents` is 0.
    public var creditsSpent: Int?
    /// Of a pending Ask to Buy: nothing is charged yet, and `amountCents` is what approving it
    /// would charge at the catalog's price now.
    public var priceOnApproval: Bool?

    public init(
        transactionId: String, accountId: String, productId: String, kind: ProductKind, quantity: Int, status: TransactionStatus,
        paymentMethod: String, amountCents: Int, currency: String, createdAt: Date, finished: Bool,
        revokedAt: Date? = nil, revocationReason: String? = nil, creditsSpent: Int? = nil
    ) {
        self.creditsSpent = creditsSpent
        self.transactionId = transactionId
        self.accountId = accountId
        self.productId = productId
        self.kind = kind
        self.quantity = quantity
        self.status = status
        self.paymentMethod = paymentMethod
        self.amountCents = amountCents
        self.currency = currency
        self.createdAt = createdAt
        self.finished = finished
        self.revokedAt = revokedAt
        self.revocationReason = revocationReason
    }
}

/// `GET /v1/admin/accounts/{id}`: an account as the store's operator sees it.
public struct AdminAccountView: Codable, Sendable, Equatable {
    /// One entry of the account's ledger.
    public struct Charge: Codable, Sendable, Equatable {
        public var transactionId: String
        /// `charge` or `refund` (negative).
        public var kind: String
        public var amountCents: Int
        public var currency: String
        public var reason: String?

        public init(transactionId: String, kind: String, amountCents: Int, currency: String, reason: String? = nil) {
            self.transactionId = transactionId
            self.kind = kind
            self.amountCents = amountCents
            self.currency = currency
            self.reason = reason
        }
    }

    public var summary: AccountSummary
    /// The ledger: charges and refunds; it sums to what was really paid.
    public var charges: [Charge]
    public var transactions: [AdminTransactionRow]
    /// The sign-in's email; nil for an anonymous account (or one deleted by its holder).
    public var email: String?
    public var disabled: Bool?
    public var deleted: Bool?
    public var devices: [DeviceInfo]?
    /// Every operator action on the account, and the holder's resets and deletion, oldest first.
    public var audit: [AccountAuditEntry]?

    public init(summary: AccountSummary, charges: [Charge], transactions: [AdminTransactionRow]) {
        self.summary = summary
        self.charges = charges
        self.transactions = transactions
    }
}

/// `GET /v1/admin/sales`: one row per day (UTC), product and currency.
public struct AdminSalesRow: Codable, Sendable, Equatable {
    /// `YYYY-MM-DD`, UTC.
    public var day: String
    public var productId: String
    public var currency: String
    public var sales: Int
    public var refunds: Int
    /// Charges less refunds, in cents of `currency`.
    public var netCents: Int
    /// With `?by=channel`: where the money was taken (``AdminSalesRow/channel(ofPaymentMethod:)``).
    public var channel: String?

    public init(day: String, productId: String, currency: String, sales: Int, refunds: Int, netCents: Int, channel: String? = nil) {
        self.day = day
        self.productId = productId
        self.currency = currency
        self.sales = sales
        self.refunds = refunds
        self.netCents = netCents
        self.channel = channel
    }

    /// The channel a transaction's payment method belongs to: `web` (the web shop's payment
    /// service), `play`, `appstore`, or `sandbox` (the sandbox's pretend methods and the store's
    /// own renewals of them). A redemption spends credits, not money: it is in no channel's
    /// figures (the credit pack it spends is, in the channel that sold the pack).
    public static func channel(ofPaymentMethod method: String) -> String {
        switch method {
        case PaidBy.stripe.rawValue: "web"
        case PaidBy.play.rawValue: "play"
        case PaidBy.appstore.rawValue: "appstore"
        default: "sandbox"
        }
    }
}

/// `GET /v1/admin/downloads`: content requests answered (200 or 206) per product and day.
public struct AdminDownloadRow: Codable, Sendable, Equatable {
    public var productId: String
    /// `YYYY-MM-DD`, UTC.
    public var day: String
    public var requests: Int
    /// The bytes those requests were to send.
    public var bytes: Int64

    public init(productId: String, day: String, requests: Int, bytes: Int64) {
        self.productId = productId
        self.day = day
        self.requests = requests
        self.bytes = bytes
    }
}

/// `GET /v1/admin/appstore/notifications`: one App Store Server Notification as the store recorded
/// it (once per `notificationUUID`), with what it did.
public struct AdminAppStoreNotificationRow: Codable, Sendable, Equatable {
    public var notificationUUID: String
    /// REFUND, REVOKE, DID_RENEW…
    public var notificationType: String
    public var subtype: String?
    public var transactionId: String?
    public var originalTransactionId: String?
    /// Kiosk's product, when the transaction names one the catalog maps.
    public var productId: String?
    public var environment: String
    public var signedDate: Date
    public var receivedAt: Date
    /// What the store did: "withdrew transaction …", "extended … until …", or why nothing.
    public var outcome: String

    public init(
        notificationUUID: String, notificationType: String, subtype: String?, transactionId: String?, originalTransactionId: String?,
        productId: String?, environment: String, signedDate: Date, receivedAt: Date, outcome: String
    ) {
        self.notificationUUID = notificationUUID
        self.notificationType = notificationType
        self.subtype = subtype
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.environment = environment
        self.signedDate = signedDate
        self.receivedAt = receivedAt
        self.outcome = outcome
    }
}

/// `GET /v1/admin/webhooks`: an endpoint of the publisher that every notification is POSTed to.
public struct AdminWebhookRow: Codable, Sendable, Equatable {
    public var id: Int64
    public var url: String
    public var createdAt: Date

    public init(id: Int64, url: String, createdAt: Date) {
        self.id = id
        self.url = url
        self.createdAt = createdAt
    }
}

/// `GET /v1/admin/products/{id}/owners` and `DELETE /v1/admin/products/{id}`: how many accounts
/// own a product (bought it, or hold a subscription period that covers the issue).
public struct AdminProductOwners: Codable, Sendable, Equatable {
    public var productId: String
    public var owners: Int
    /// True in the answer of a removal.
    public var removed: Bool?

    public init(productId: String, owners: Int, removed: Bool? = nil) {
        self.productId = productId
        self.owners = owners
        self.removed = removed
    }
}

/// `POST /v1/admin/webhooks` and `DELETE /v1/admin/webhooks`: the endpoint's URL.
public struct AdminWebhookRequest: Codable, Sendable, Equatable {
    public var url: String

    public init(url: String) { self.url = url }
}

/// `GET /v1/admin/notifications[?failed=true]`: one notification's delivery to one endpoint.
public struct AdminNotificationRow: Codable, Sendable, Equatable {
    /// The `notificationUUID`.
    public var notificationId: String
    public var type: String
    public var subtype: String?
    public var accountId: String
    public var transactionId: String?
    public var url: String
    /// `pending` (being retried), `delivered` or `failed` (retries gave up; `resend` starts again).
    public var state: String
    public var attempts: Int
    /// The endpoint's last answer, or nil when it gave none.
    public var lastStatus: Int?
    public var lastError: String?
    public var createdAt: Date
    public var nextAttemptAt: Date?
    public var deliveredAt: Date?

    public init(
        notificationId: String, type: String, subtype: String?, accountId: String, transactionId: String?, url: String, state: String,
        attempts: Int, lastStatus: Int?, lastError: String?, createdAt: Date, nextAttemptAt: Date?, deliveredAt: Date?
    ) {
        self.notificationId = notificationId
        self.type = type
        self.subtype = subtype
        self.accountId = accountId
        self.transactionId = transactionId
        self.url = url
        self.state = state
        self.attempts = attempts
        self.lastStatus = lastStatus
        self.lastError = lastError
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt
        self.deliveredAt = deliveredAt
    }
}

/// One event a payment channel sent, as the store kept it (`kiosk admin events`).
public struct AdminChannelEventRow: Codable, Sendable, Equatable {
    /// `stripe`.
    public var channel: String
    public var eventId: String
    public var type: String
    /// The channel's payment the event is about (a payment intent), when it names one.
    public var payment: String?
    /// `granted`, `revoked`, `unmatched`, `owned` (paid for what the account had), `refunded` (an
    /// `owned` payment given back, or its refund), `refused` (a void before its purchase came),
    /// `pending`, `partial_refund` or `ignored`.
    public var outcome: String
    public var detail: String
    public var accountId: String?
    public var transactionId: String?
    public var receivedAt: Date

    public init(channel: String, eventId: String, type: String, payment: String?, outcome: String, detail: String,
                accountId: String?, transactionId: String?, receivedAt: Date) {
        self.channel = channel
        self.eventId = eventId
        self.type = type
        self.payment = payment
        self.outcome = outcome
        self.detail = detail
        self.accountId = accountId
        self.transactionId = transactionId
        self.receivedAt = receivedAt
    }
}

/// `GET /v1/admin/tax?quarter=2026Q4`: a quarter's sales per country, rate and currency, as an EU
/// One-Stop-Shop return asks for them (what was taxed, and the tax), summed from the ledger:
/// charges less refunds and credits, each with its own share of tax.
public struct AdminTaxRow: Codable, Sendable, Equatable {
    /// The reader's country (their storefront); absent for sales made with none chosen.
    public var country: String?
    /// The rate in basis points (700: 7 %); absent where no tax was charged.
    public var rateBasisPoints: Int?
    public var currency: String
    /// Charges, and refunds and credits, in the quarter.
    public var sales: Int
    public var refunds: Int
    /// What readers paid, tax included; the tax in it; and what is left (the taxable amount).
    public var grossCents: Int
    public var taxCents: Int
    public var netCents: Int

    public init(country: String?, rateBasisPoints: Int?, currency: String, sales: Int, refunds: Int, grossCents: Int, taxCents: Int) {
        (self.country, self.rateBasisPoints, self.currency, self.sales, self.refunds) = (country, rateBasisPoints, currency, sales, refunds)
        (self.grossCents, self.taxCents, self.netCents) = (grossCents, taxCents, grossCents - taxCents)
    }

    /// "7", "5.5", "2.1": a rate as a person reads it.
    public static func rateText(_ basisPoints: Int?) -> String {
        guard let basisPoints else { return "" }
        let whole = basisPoints / 100, fraction = basisPoints % 100
        if fraction == 0 { return "\(whole)" }
        return fraction % 10 == 0 ? "\(whole).\(fraction / 10)" : "\(whole).\(String(format: "%02d", fraction))"
    }
}

/// A calendar quarter, `2026Q4`: its first instant and the next quarter's, in UTC.
public enum TaxQuarter {
    public static func range(_ text: String) -> (start: Date, end: Date)? {
        let parts = text.uppercased().split(separator: "Q")
        guard parts.count == 2, parts[0].count == 4, let year = Int(parts[0]), (2000...2199).contains(year),
              let quarter = Int(parts[1]), (1...4).contains(quarter) else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? .gmt
        guard let start = calendar.date(from: DateComponents(year: year, month: (quarter - 1) * 3 + 1, day: 1)),
              let end = calendar.date(byAdding: .month, value: 3, to: start) else { return nil }
        return (start, end)
    }
}

/// `GET /v1/admin/reinstatements`: a receipt the store signed, presented for a transaction its
/// database no longer held (a restore to a backup from before it), and what became of it:
/// `reinstated` (written again, with its charge), `chargedTwice` (written again as a free re-buy
/// beside the same book bought since: refund one), `creditsNotRecovered` (a credit pack: not
/// restored), `accountUnknown` (an account the backup does not hold: nothing written),
/// `reinstatedWithoutPrice` (written again; paid with credits, a code or a grant, which the
/// receipt does not say: credits spent since the backup are not taken back).
public struct AdminReinstatementRow: Codable, Sendable, Equatable {
    public var transactionId: String
    public var accountId: String
    public var productId: String
    public var outcome: String
    public var amountCents: Int
    public var currency: String?
    public var purchaseDate: Date
    public var presentedAt: Date
}
