/// Text from outside (a payment channel's event, a store's answer) as a terminal shows it: its
/// control characters escaped, so that none moves the cursor, colours the screen or forges a line.
public enum TerminalText {
    public static func escaped(_ text: String) -> String {
        var shown = ""
        shown.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || (0x7F..<0xA0).contains(scalar.value) {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }
}
