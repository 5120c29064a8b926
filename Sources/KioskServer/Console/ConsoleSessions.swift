import Foundation
import KioskStore

/// The console's logged-in people: a session per login, named by a random id kept in an
/// HttpOnly, SameSite=Strict cookie, each with its own CSRF token that every form carries.
///
/// Kept in this process only: the console is served on one instance's admin address, and a
/// restart asks the operator to log in again. Idle time is measured on the monotonic clock, so
/// a wall-clock jump neither ends every session nor keeps one alive.
actor ConsoleSessions {
    struct Session: Sendable {
        let csrf: String
        var lastSeen: ContinuousClock.Instant
        /// What the session's last form did, shown once by the page it led to.
        var done: String?
    }

    static let cookie = "kiosk_console"

    private var sessions: [String: Session] = [:]
    private let idleLimit: Duration
    private let limit: Int

    init(idleLimit: Duration = .seconds(8 * 3600), limit: Int = 256) {
        self.idleLimit = idleLimit
        self.limit = limit
    }

    /// A new session; the oldest is dropped when there are `limit` already.
    func open() -> (id: String, csrf: String) {
        dropIdle()
        if sessions.count >= limit, let oldest = sessions.min(by: { $0.value.lastSeen < $1.value.lastSeen })?.key {
            sessions[oldest] = nil
        }
        let id = Store.randomHex(bytes: 32)
        let csrf = Store.randomHex(bytes: 32)
        sessions[id] = Session(csrf: csrf, lastSeen: .now)
        return (id, csrf)
    }

    /// The session `id` names, if it is open and not idle too long; seeing it keeps it open.
    func session(_ id: String) -> Session? {
        guard var session = sessions[id] else { return nil }
        guard ContinuousClock.now - session.lastSeen < idleLimit else {
            sessions[id] = nil
            return nil
        }
        session.lastSeen = .now
        sessions[id] = session
        return session
    }

    /// Keeps what a form did, for the page the form's 303 leads to: the page says it once. Kept
    /// here, not in that page's address, so no link can make the console say something was done.
    func keep(done: String, for id: String) {
        sessions[id]?.done = done
    }

    /// What the session's last form did, once; nil after.
    func takeDone(_ id: String) -> String? {
        defer { sessions[id]?.done = nil }
        return sessions[id]?.done
    }

    func close(_ id: String) {
        sessions[id] = nil
    }

    private func dropIdle() {
        let now = ContinuousClock.now
        sessions = sessions.filter { now - $0.value.lastSeen < idleLimit }
    }
}
