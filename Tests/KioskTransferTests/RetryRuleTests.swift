import KioskCore
import KioskTransfer
import Testing

/// The one retry rule every queue asks: which statuses and transport failures are worth trying again.
@Suite("What is worth trying again")
struct RetryRuleTests {
    @Test("408, 429 and every 5xx are transient; every other status is an answer")
    func statuses() {
        for status in 200..<600 {
            let expected = status == 408 || status == 429 || status >= 500
            #expect(RetryRule.isTransient(status: status) == expected, "\(status)")
        }
    }

    @Test("refused, timed out, broken or stopped transfers are transient; a full disk, a body too large or anything else is not",
          arguments: [(TransferError.Kind.unreachable, true), (.timedOut, true), (.interrupted, true), (.aborted, true),
                      (.localWrite, false), (.tooLarge, false), (.failed, false)])
    func transport(kind: TransferError.Kind, transient: Bool) {
        #expect(kind.isTransient == transient)
        #expect(TransferError(url: "http://x", kind: kind, message: "m").isTransient == transient)
    }

    @Test("backoff: half fixed and half random, doubling from the base to the cap, never sooner than Retry-After (capped)")
    func backoff() {
        let backoff = Backoff(base: 2, cap: 60)
        for attempt in 1...8 {
            let full = min(60, 2 * Double(1 << (attempt - 1)))
            let delay = backoff.delay(afterAttempts: attempt, retryAfter: nil)
            #expect(delay >= full / 2 && delay <= full)
        }
        #expect(backoff.delay(afterAttempts: 1, retryAfter: 30) >= 30)
        #expect(backoff.delay(afterAttempts: 1, retryAfter: 3600) <= 60)
    }
}
