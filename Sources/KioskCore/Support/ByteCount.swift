import Foundation

/// A number of bytes as people read it, in one style everywhere Kiosk shows one: "0 B", "512 B",
/// "1.5 KiB", "8.0 MiB" (binary units, one decimal, and no "Zero KB").
public enum ByteCount {
    public static func text(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\(String(format: "%.1f", value)) \(units[unit])"
    }
}
