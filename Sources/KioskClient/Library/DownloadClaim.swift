import Foundation

/// A process that works on downloads: its pid, so a dead owner is noticed at once, and a nonce,
/// so two engines in one process (or a reused pid) never pass for each other.
struct ClaimOwner: Sendable, Equatable {
    let id: String

    init() {
        id = "\(getpid()):\(UUID().uuidString.prefix(8).lowercased())"
    }

    init(id: String) {
        self.id = id
    }

    /// The process named in an owner id (or a claim token that starts with one), if any.
    static func pid(in id: String) -> Int32? {
        id.split(separator: ":").first.flatMap { Int32($0) }.flatMap { $0 > 0 ? $0 : nil }
    }

    /// True when the process named in `id` is certainly gone. Signal 0 checks existence only;
    /// EPERM means alive under another user, and an id without a pid is taken as alive.
    static func isGone(_ id: String) -> Bool {
        guard let pid = pid(in: id) else { return false }
        return kill(pid, 0) != 0 && errno == ESRCH
    }
}

/// One hold on one download, fenced: the database bumps `generation` at every claim, and every
/// write the holder makes (progress, a state change, the install) checks owner and generation in
/// the same SQLite transaction. A holder that was suspended past its lease and lost the download
/// to another process finds its writes refused, and can only stop.
struct DownloadClaim: Sendable, Equatable {
    let productId: String
    let owner: ClaimOwner
    let generation: Int64

    /// Names the files that belong to this claim alone (its staging folder): the owner's pid
    /// first, so a dead owner's leftovers can be told from a live one's.
    var token: String { "\(owner.id):\(generation)" }
}

/// Where a lease stands on the machine's monotonic clock: `CLOCK_MONOTONIC` nanoseconds, tagged
/// with the boot they count from (a reboot restarts the count and ends every claim).
///
/// Wall time decides nothing about a claim: a clock set back or forward (NTP, a reader changing
/// the date) neither keeps a dead owner's claim alive nor takes a live owner's away. A suspended
/// machine stops this clock for everyone at once, so a sleep does not lapse leases either.
struct LeaseInstant: Sendable, Equatable {
    var boot: String
    var nanoseconds: Int64

    func adding(seconds: TimeInterval) -> LeaseInstant {
        LeaseInstant(boot: boot, nanoseconds: nanoseconds + Int64(seconds * 1e9))
    }
}

/// The clock leases are measured on; tests pass their own to move it.
struct LeaseClock: Sendable {
    var now: @Sendable () -> LeaseInstant

    static let system = LeaseClock {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return LeaseInstant(boot: bootID, nanoseconds: Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec))
    }

    /// This boot's identity; a machine without one (not Linux) counts as one boot.
    private static let bootID: String = {
        let text = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8)) ?? ""
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }()

    /// True when a claim no longer holds: no owner, a lease from another boot or past its end on
    /// this clock, or an owner process that is gone.
    func hasLapsed(owner: String?, boot: String?, deadline: Int64?) -> Bool {
        guard let owner, let boot, let deadline else { return true }
        let now = now()
        guard boot == now.boot, deadline > now.nanoseconds else { return true }
        return ClaimOwner.isGone(owner)
    }
}
