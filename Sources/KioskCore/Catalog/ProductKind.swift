/// What a product is, which decides how it is bought, owned and restored.
public enum ProductKind: String, Codable, Sendable, CaseIterable {
    /// Credits: bought in any quantity, used up, never restored.
    case consumable
    /// A book or a magazine issue: owned forever, restorable.
    case nonConsumable
    /// A magazine series for a period: grants every issue published inside the period; restorable.
    case subscription
}
