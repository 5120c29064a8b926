import Foundation

/// How the delivery worker sends notifications to the publisher's endpoints.
public struct NotificationDeliveryConfiguration: Sendable {
    /// How often each instance looks for deliveries due.
    public var interval: Duration = .milliseconds(500)
    /// The wait after each failed attempt, by attempt (the last repeats): a 2xx ends it.
    public var retryDelays: [TimeInterval] = [5, 30, 120, 600, 3_600, 6 * 3_600]
    /// How long an undelivered notification is retried before it is marked failed (`resend` starts it again).
    public var giveUpAfter: TimeInterval = 3 * 86_400
    /// Seconds one POST may take.
    public var requestTimeout: TimeInterval = 10
    /// The most deliveries one pass claims. A pass is short (its turns start no POST after one
    /// request timeout), so is the claim's lease, and a killed instance's claims are taken over soon.
    ///
    /// **Performance figure.** Replaces 32 a pass, each the oldest of its account, which
    /// delivered 950 a second during `BENCH_ONLY=purchases`'s 2,100 purchases a second (15,425
    /// waiting after 12 s). Runs of 256 in order, dealt to 32 threads: 141–149 waiting at the end of
    /// 2,391–2,456 purchases a second; 29,695 waiting drained at 8,197 a second (2026-11-27).
    public var batch = 256
    /// The accounts whose deliveries a pass sends at once, each over a connection of its own kept
    /// open for the next pass; one account's go one after another, in order.
    public var connections = 32

    public init() {}
}
