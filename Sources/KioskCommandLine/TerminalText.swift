/// Text from outside (a payment channel's event, a store's answer) as a terminal shows it: its
/// control characters escaped, so that none moves the cursor, colours the screen or forges a line,
/// and so are the bidirectional controls (Unicode's "Trojan Source" characters: embeddings,
/// overrides, isolates and marks), which reorder what follows them on the line.
public enum TerminalText {
    public static func escaped(_ text: String) -> String {
        var shown = ""
        shown.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || (0x7F..<0xA0).contains(scalar.value) || isBidiControl(scalar.value) {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }

    /// U+061C, U+200E–U+200F, U+202A–U+202E and U+2066–U+2069.
    static func isBidiControl(_ value: UInt32) -> Bool {
        value == 0x061C || (0x200E...0x200F).contains(value) || (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
    }
}
