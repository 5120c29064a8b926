import Foundation

/// Places where a test can have the client killed, to prove that nothing is lost or charged twice.
///
/// Active only when `KIOSK_TEST_CRASH_POINT` names the point; the process then sends itself
/// SIGKILL, which no handler can soften: exactly what a power cut or the OOM killer does.
enum CrashPoint: String {
    /// The server charged and answered; the client has not stored the receipt.
    case afterCharge = "after-charge"
    /// The receipt is stored; the transaction is not finished.
    case afterReceipt = "after-receipt"

    func reach() {
        guard ProcessInfo.processInfo.environment["KIOSK_TEST_CRASH_POINT"] == rawValue else { return }
        kill(getpid(), SIGKILL)
    }
}
