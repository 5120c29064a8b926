import Foundation

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
        "\(purpose) needs \(format(needed)) free in \(folder.path), which has \(format(available)); free some space; the download waits with its bytes"
    }

    static func format(_ bytes: Int64) -> String {
        let mebibytes = Double(bytes) / 1_048_576
        return mebibytes >= 1 ? String(format: "%.1f MiB", mebibytes) : "\(bytes) bytes"
    }
}
