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
    /// Deliveries one pass claims and POSTs at once, each on a connection kept open for the next
    /// pass. A pass is short (one request timeout at most), so is the claim's lease, and a killed
    /// instance's claims are taken over soon.
    public var batch = 32

    public init() {}
}
