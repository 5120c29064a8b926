import Foundation
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

    @Test("Retry-After is read one way everywhere: delta-seconds or an HTTP date; a fraction, a sign or anything else is no wait")
    func retryAfterHeader() {
        #expect(RetryAfter.seconds("120") == 120)
        #expect(RetryAfter.seconds(" 5 ") == 5)
        #expect(RetryAfter.seconds("0") == 0)
        for refused in ["1.5", "-1", "+3", "soon", "", nil] as [String?] {
            #expect(RetryAfter.seconds(refused) == nil, "\(refused ?? "nil")")
        }
        let now = Date(timeIntervalSince1970: 784_111_717)  // Sun, 06 Nov 1994 08:48:37 GMT
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == 60)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:40:00 GMT", now: now) == 0, "a date past is no wait")
    }
}
