import Foundation

/// What a piece of work came to, as a command's exit status says it: the engine decides, so an
/// app and the command line agree.
public enum WorkOutcome: Sendable, Equatable {
    /// Everything asked for is done (or, for a purchase whose download was left for later, saved).
    case complete
    /// Saved and under way, not done: a download waits for its retry, was interrupted or paused,
    /// or the store could not be reached. A later `resume` (or the agent) carries it on.
    case pending
    /// Something failed for good (a purchase refused, a download that cannot succeed, a receipt
    /// that does not verify); it says why.
    case failed
}

/// What `buy` or `redeem` ended with.
public struct PurchaseResult: Sendable {
    /// The purchase as stored; its state says the outcome.
    public var record: PaymentRecord
    /// The account's credit balance after the purchase, when the server said.
    public var credits: Int?
    /// The server could not be reached: the purchase is saved and will be sent by the next command.
    public var savedOffline = false
    /// The store answered that it failed underneath, with its message: the purchase is saved and
    /// will be sent again by the next command, with its key.
    public var storeFailed: String?
    /// The account already owned it: nothing was charged (the record is the standing purchase).
    public var alreadyOwned = false
    /// An Ask to Buy request for the product is already waiting for approval: nothing new was
    /// sent or saved (the record is the standing request).
    public var alreadyPending = false
    /// What running its download did, when the content was downloaded as part of the purchase.
    public var downloads: DownloadRunReport?
    /// The purchase is finished and its content waits in the queue (the reader asked to download later).
    public var contentQueued = false
    /// Whether the purchase was delivered: complete when paid for and (unless left for later)
    /// installed; pending when saved offline or its download waits; failed when refused.
    public var outcome = WorkOutcome.complete
}

/// What replaying unfinished work did.
public struct ReplayReport: Sendable, Equatable {
    public var sent = 0
    public var finished = 0
    public var deferredResolved = 0
    public var revoked: [String] = []
    /// Saved purchases the store refused when they were finally sent (declined, not enough
    /// credits), and Ask to Buy requests declined: nothing was charged; each record says why.
    public var refused: [String] = []
    /// Of `refused`, the Ask to Buy requests the approver declined (or the store cancelled).
    public var declined: [String] = []
    /// Of `revoked`, the credit packs: they granted credits, not content, so no library folder changed.
    public var revokedCredits: [String] = []
    /// Of `revoked`, the subscriptions (a period of one): a subscription has no folder of its own;
    /// the issues no other purchase or period covers went with it.
    public var revokedPeriods: [String] = []
    /// Of `revoked`, the products whose content stays in the library: another standing purchase,
    /// or a subscription period covering the issue, still entitles it.
    public var revokedKept: [String] = []
    /// Items that failed again: each keeps its error and its next attempt; the others went on.
    public var failed: [String] = []
    /// The server could not be reached; the rest waits for the next command.
    public var offline = false
    /// Transactions of the account this device did not hold (bought on another device, renewed or
    /// granted by the store), now saved with their receipts and delivered or queued.
    public var arrived: [PaymentRecord] = []
    /// One line per transaction of the account that could not be taken in (its receipt did not verify).
    public var notTakenIn: [String] = []
    /// Of `arrived`, the products the store's catalog no longer lists (removed by the operator):
    /// their receipts are kept, but there is no content to download.
    public var withdrawn: [String] = []
    /// One line per saved purchase left unsent because it belongs to another store than this one.
    public var heldForOtherStore: [String] = []
    /// One line per saved purchase left unsent because it belongs to another account than the one
    /// this device uses now.
    public var heldForOtherAccount: [String] = []
    /// The account whose token the store refused (401): this device was signed out of it
    /// elsewhere (removed from another device, signed out everywhere, a password reset, the
    /// account disabled). What needs the account waits until the reader signs in to it again.
    public var signedOut: String?

    public init(sent: Int = 0, finished: Int = 0, deferredResolved: Int = 0, revoked: [String] = [], failed: [String] = [], offline: Bool = false) {
        self.sent = sent
        self.finished = finished
        self.deferredResolved = deferredResolved
        self.revoked = revoked
        self.failed = failed
        self.offline = offline
    }

    /// Adds a later replay's work to this one's.
    mutating func absorb(_ later: ReplayReport) {
        sent += later.sent
        finished += later.finished
        deferredResolved += later.deferredResolved
        revoked += later.revoked
        refused += later.refused
        declined += later.declined
        revokedCredits += later.revokedCredits
        revokedPeriods += later.revokedPeriods
        revokedKept += later.revokedKept
        failed = later.failed
        offline = later.offline
        arrived += later.arrived
        notTakenIn += later.notTakenIn
        withdrawn += later.withdrawn
        heldForOtherStore = later.heldForOtherStore
        heldForOtherAccount = later.heldForOtherAccount
        signedOut = later.signedOut
    }

    /// True when replay moved anything on or found anything wrong.
    public var isEmpty: Bool { sent + finished + deferredResolved == 0 && revoked.isEmpty && refused.isEmpty && failed.isEmpty && arrived.isEmpty && notTakenIn.isEmpty && heldForOtherStore.isEmpty
        && heldForOtherAccount.isEmpty && signedOut == nil }
}

/// What a restore did.
public struct RestoreResult: Sendable {
    public init(restored: [PaymentRecord] = [], refused: [String] = [], withdrawn: [String] = []) {
        self.restored = restored
        self.refused = refused
        self.withdrawn = withdrawn
    }

    /// The transactions brought back, as stored now.
    public var restored: [PaymentRecord] = []
    /// What downloading their content did, when it was downloaded as part of the restore.
    public var downloads: DownloadRunReport?
    /// One line per transaction left out (its receipt did not verify, say); the others were restored.
    public var refused: [String] = []
    /// Restored products the store's catalog no longer lists: their receipts are kept, but there
    /// is no content to download.
    public var withdrawn: [String] = []
    /// Failed when any transaction was refused or a download failed for good; pending while
    /// downloads wait.
    public var outcome = WorkOutcome.complete
}

/// What `resume` did, over all its rounds.
public struct ResumeReport: Sendable {
    /// What replaying unfinished purchases did, first and between rounds (merged).
    public var replay = ReplayReport()
    /// Purchases saved on this device that the store has not answered yet (it could not be
    /// reached, or this device was signed out: ``ReplayReport/signedOut``).
    public var unsent: [String] = []
    /// Products queued before or between rounds (covered issues, updates, missing folders).
    public var queued: [String] = []
    /// The downloads' outcome, each product's latest.
    public var downloads = DownloadRunReport()
    /// The caller's Task was cancelled while waiting for the next retry.
    public var interruptedWhileWaiting = false
    /// Downloads that had already failed for good before this resume (it does not run them
    /// again: `restore` queues them anew); they make the outcome failed, like this run's failures.
    public var failedEarlier: [String] = []
    /// Complete when every download is installed and every saved purchase answered; pending while
    /// any waits (a purchase held for its own store or account among them); failed when a download failed for good, the store refused a saved purchase, or
    /// saved purchases wait for a device signed out elsewhere to sign in again.
    public var outcome = WorkOutcome.complete
}

/// One step of `resume`, told as it happens so a person sees the work go on.
public enum ResumeStep: Sendable {
    /// These products were queued.
    case queued([String])
    /// A round of downloads ended.
    case ran(DownloadRunReport)
    /// Nothing is due now: sleeping until the next waiting download is.
    case waiting(until: Date)
}

extension DownloadRunReport {
    /// Failed when any download failed for good; pending while any waits, was interrupted or paused.
    public var outcome: WorkOutcome {
        if !failed.isEmpty { return .failed }
        if !waiting.isEmpty || !interrupted.isEmpty || !paused.isEmpty { return .pending }
        return .complete
    }
}
