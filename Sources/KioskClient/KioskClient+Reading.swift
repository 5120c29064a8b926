import Foundation
import KioskCore

/// Where the reader is in each publication, shared with every device of the account (the
/// store's OPDS Progression, the same place KOReader's sync reads and writes).
extension KioskClient {
    /// The account's last-known place in `productId`, or nil when no device has said one.
    public func readingPosition(of productId: String) async throws -> ReadingPosition? {
        try await accountAPI().readingPosition(of: productId)
    }

    /// Says this device is `progression` (0 to 1) into `productId`, now. A newer place another
    /// device sent stays; the answer says which place the store kept and whether it is this one.
    public func setReadingPosition(of productId: String, progression: Double, references: [String]? = nil) async throws -> (kept: ReadingPosition, stored: Bool) {
        guard progression.isFinite, (0...1).contains(progression) else {
            throw ClientError.invalidRequest("a place in a publication is from 0 to 100 %")
        }
        let api = try await accountAPI()
        // The store's own name and ID of this device, as its device list shows them.
        let this = try await api.devices().devices.first(where: \.current)
        let device = ReadingPosition.Device(id: "urn:kiosk:device:" + (this?.id ?? "unknown"), name: this?.name ?? "kiosk")
        let now = ISO8601DateFormatter().string(from: Date())
        return try await api.setReadingPosition(ReadingPosition(modified: now, device: device, progression: progression, references: references), of: productId)
    }

    private func accountAPI() async throws -> StoreAPI {
        guard let api = try await purchases.existingAccountAPI() else {
            throw ClientError.invalidRequest("this device has no account yet; buy something or sign in first (kiosk login --email EMAIL)")
        }
        return api
    }
}
