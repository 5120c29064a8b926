import KioskCommandLine
import Testing

/// What the commands print of outside text (a channel's event, a reason, a device's name).
@Suite("Outside text on a terminal")
struct TerminalTextTests {
    @Test("control characters and bidirectional controls are shown escaped; other text, right-to-left scripts included, as it is")
    func escapes() {
        // An operator's grant reason that would show as "…refund approved" reversed on a terminal.
        #expect(TerminalText.escaped("grant \u{202E}devorppa dnufer") == "grant \\u{202e}devorppa dnufer")
        #expect(TerminalText.escaped("a\u{2066}b\u{2069}c\u{200F}d\u{061C}") == "a\\u{2066}b\\u{2069}c\\u{200f}d\\u{61c}")
        #expect(TerminalText.escaped("line\n\u{1B}[31mred") == "line\\u{a}\\u{1b}[31mred")
        #expect(TerminalText.escaped("שלום עולם · Ünïcødé") == "שלום עולם · Ünïcødé")
    }
}
