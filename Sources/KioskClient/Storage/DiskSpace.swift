import Foundation
import KioskCore

/// Free space on the file system of a folder, and the message that says how much is missing.
enum DiskSpace {
    /// Bytes an unprivileged writer may still use under `folder`, or nil when it cannot be told.
    static func available(at folder: URL) -> Int64? {
        var info = statvfs()
        guard statvfs(folder.path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// A person's words for the shortfall: how much is needed, where, and what to do.
    static func shortfall(needed: Int64, available: Int64, at folder: URL, for purpose: String) -> String {
        "\(purpose) needs \(ByteCount.text(needed)) free in \(folder.path), which has \(ByteCount.text(available)); free some space; the download waits with its bytes"
    }
}
