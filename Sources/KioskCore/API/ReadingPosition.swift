import Foundation

/// Where a reader is in a publication, as OPDS Progression 1.0 writes it
/// (`application/opds-progression+json`): the store's `/opds/progression/{id}` and `kiosk progress`.
public struct ReadingPosition: Codable, Sendable, Equatable {
    /// The device that said it: a URI and a name to show.
    public struct Device: Codable, Sendable, Equatable {
        public var id: String
        public var name: String

        public init(id: String, name: String) {
            self.id = id
            self.name = name
        }
    }

    public var title: String?
    /// When the device read there, ISO 8601 (`2026-01-27T11:00:00Z`).
    public var modified: String
    public var device: Device
    /// How far into the publication, from 0 to 1.
    public var progression: Double
    /// Places inside the publication (`#page=17`, `chapter1.xhtml#par36`).
    public var references: [String]?

    public init(title: String? = nil, modified: String, device: Device, progression: Double, references: [String]? = nil) {
        (self.title, self.modified, self.device, self.progression, self.references) = (title, modified, device, progression, references)
    }
}
