@testable import KioskServer
import KioskCore
import Testing

@Suite("If-None-Match comparisons (RFC 9110 §13.1.2)")
struct EntityTagTests {
    let tags = ["\"abc\"", "\"gz-abc\""]

    @Test("a listed tag matches, weak or strong, with or without spaces; * matches anything")
    func matches() {
        for value in ["\"abc\"", " \"abc\" ", "\"x\", \"abc\"", "\"x\",\t\"gz-abc\"", "W/\"abc\"", "\"x\", W/\"gz-abc\"", "*", "\"x\", *"] {
            #expect(EntityTag.ifNoneMatch(value, matchesAnyOf: tags), "\(value)")
        }
    }

    @Test("an unlisted, partial, unquoted or empty tag does not match")
    func misses() {
        for value in ["\"ab\"", "abc", "\"abc", "\"abc\"x", "", ",", "W/", "\"ABC\"", "\"abé\"", "w/\"abc\""] {
            #expect(!EntityTag.ifNoneMatch(value, matchesAnyOf: tags), "\(value)")
        }
    }

    @Test("optional whitespace is spaces and tabs only, at either end")
    func optionalWhitespace() {
        #expect(" \t a b \t".trimmingOptionalWhitespace() == "a b")
        #expect("   ".trimmingOptionalWhitespace() == "")
        #expect("".trimmingOptionalWhitespace() == "")
        #expect("\né\n".trimmingOptionalWhitespace() == "\né\n")
    }
}
