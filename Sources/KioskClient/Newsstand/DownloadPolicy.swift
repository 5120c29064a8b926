import Foundation

/// When the agent may download on its own (new issues, updates, retries): the constraints Android's
/// WorkManager and Apple's URLSession name (an unmetered network, a battery not low, charging). A
/// download the reader starts (`kiosk buy`, `kiosk resume`) ignores it.
public struct DownloadPolicy: Sendable, Equatable {
    /// Only on a network that is not metered (NetworkManager's "Metered": a phone's hotspot, a
    /// mobile broadband link, or one the user marked so).
    public var unmeteredOnly = false
    /// On battery, only above this charge (percent); nil: any charge.
    public var batteryFloor: Int? = nil
    /// Only while the device is charging or on mains power.
    public var chargingOnly = false

    public init(unmeteredOnly: Bool = false, batteryFloor: Int? = nil, chargingOnly: Bool = false) {
        (self.unmeteredOnly, self.batteryFloor, self.chargingOnly) = (unmeteredOnly, batteryFloor, chargingOnly)
    }

    /// Why automatic downloads wait under `conditions`, or nil when they may go.
    public func deferral(_ conditions: DeviceConditions) -> String? {
        if unmeteredOnly, conditions.network == .metered {
            return "the network is metered and automatic downloads wait for one that is not (kiosk config set download-network any lets them go)"
        }
        if chargingOnly, !conditions.charging {
            return "the device is on battery and automatic downloads wait for it to charge (kiosk config unset charging-only lets them go)"
        }
        if let floor = batteryFloor, !conditions.charging, let charge = conditions.batteryPercent, charge < floor {
            return "the battery is at \(charge) %, under the \(floor) % automatic downloads wait for (kiosk config unset battery-floor lets them go)"
        }
        return nil
    }
}

/// What the platform says of the device now.
public struct DeviceConditions: Sendable, Equatable {
    public enum Network: String, Sendable {
        case unmetered, metered
        /// Nothing says (no NetworkManager): taken as not metered, as a desktop's fixed line is.
        case unknown
    }

    public var network: Network
    /// The battery's charge in percent; nil without a battery (mains power).
    public var batteryPercent: Int?
    /// Charging, or on mains power (no battery, or a mains or USB supply online).
    public var charging: Bool

    public init(network: Network, batteryPercent: Int?, charging: Bool) {
        (self.network, self.batteryPercent, self.charging) = (network, batteryPercent, charging)
    }
}

/// Where the conditions come from: ``LinuxDeviceConditions`` by default; an app supplies its own
/// platform's answer (NWPathMonitor's `isExpensive`, UIDevice's battery state, Android's ConnectivityManager).
public protocol DeviceConditionsSource: Sendable {
    func current() async -> DeviceConditions
}

/// A fixed answer: an app that already knows, or a test.
public struct FixedDeviceConditions: DeviceConditionsSource {
    public var conditions: DeviceConditions
    public init(_ conditions: DeviceConditions) { self.conditions = conditions }
    public func current() async -> DeviceConditions { conditions }
}

/// Linux's answer, read from the system each time it is asked:
///
/// - The network: NetworkManager's global `Metered` property over D-Bus, read with systemd's
///   `busctl` (`u 1` yes and `u 3` guessed yes are metered; `u 2`, `u 4` are not; `u 0` unknown).
///   No `busctl`, no NetworkManager, or no answer within 2 s: unknown, which counts as not metered.
/// - Power: `/sys/class/power_supply`: a `Battery` supply's `capacity` and `status` (`Charging`
///   or `Full` count as charging); a `Mains` or `USB` supply `online` means mains power. No battery
///   at all: mains power.
public struct LinuxDeviceConditions: DeviceConditionsSource {
    public var powerSupplies: URL
    public var busctl: String

    public init(powerSupplies: URL = URL(fileURLWithPath: "/sys/class/power_supply"), busctl: String = "busctl") {
        (self.powerSupplies, self.busctl) = (powerSupplies, busctl)
    }

    public func current() async -> DeviceConditions {
        let (percent, charging) = power()
        return DeviceConditions(network: await network(), batteryPercent: percent, charging: charging)
    }

    func power() -> (percent: Int?, charging: Bool) {
        let supplies = (try? FileManager.default.contentsOfDirectory(atPath: powerSupplies.path)) ?? []
        func read(_ supply: String, _ name: String) -> String? {
            (try? String(contentsOf: powerSupplies.appendingPathComponent(supply).appendingPathComponent(name), encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        var percent: Int?
        var charging = false
        var battery = false
        for supply in supplies.sorted() {
            switch read(supply, "type") {
            case "Battery":
                battery = true
                if let capacity = read(supply, "capacity").flatMap(Int.init) { percent = min(percent ?? 100, capacity) }
                if ["Charging", "Full"].contains(read(supply, "status") ?? "") { charging = true }
            case "Mains", "USB", "USB_C", "USB_PD":
                if read(supply, "online") == "1" { charging = true }
            default:
                break
            }
        }
        return (battery ? percent : nil, charging || !battery)
    }

    func network() async -> DeviceConditions.Network {
        let answer = await Self.run(busctl, ["get-property", "org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager",
                                            "org.freedesktop.NetworkManager", "Metered"])
        return switch answer?.trimmingCharacters(in: .whitespacesAndNewlines) {
        case "u 1", "u 3": .metered
        case "u 2", "u 4": .unmetered
        default: .unknown
        }
    }

    /// A program's standard output, or nil when it cannot run, fails, or takes over 2 s (then it
    /// is killed). It runs on a thread of its own: a wait must not hold one of Swift's few.
    static func run(_ program: String, _ arguments: [String]) async -> String? {
        await Task.detached { () -> String? in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [program] + arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return nil }
            let pid = process.processIdentifier
            let killer = DispatchWorkItem { kill(pid, SIGKILL) }
            DispatchQueue.global().asyncAfter(deadline: .now() + 2, execute: killer)
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            killer.cancel()
            guard process.terminationReason == .exit, process.terminationStatus == 0 else { return nil }
            return String(decoding: data, as: UTF8.self)
        }.value
    }
}
