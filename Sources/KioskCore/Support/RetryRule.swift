/// The one rule for which HTTP answers are worth sending again unchanged: the payment queue, the
/// download queue and `kiosk fetch` all ask it (and the schedule is ``Backoff``'s). Which transport
/// failures are transient is `TransferError.Kind.isTransient`, beside libcurl's codes.
public enum RetryRule {
    /// 408 (the server gave up waiting for the request), 429 (rate limited) and every 5xx: the same
    /// request may succeed later without anyone changing anything. Every other status is an answer.
    public static func isTransient(status: Int) -> Bool {
        status == 408 || status == 429 || (500..<600).contains(status)
    }
}
