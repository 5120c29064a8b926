import Foundation
@testable import KioskStore
import Testing

@Suite("Random IDs")
struct RandomIDTests {
    @Test("a notification's ID is a lowercase version 4 UUID (RFC 9562's variant), and 10,000 of them are all different")
    func notificationUUID() {
        var seen: Set<String> = []
        for _ in 0..<10_000 {
            let text = Store.newUUID()
            #expect(text == text.lowercased())
            let uuid = UUID(uuidString: text)
            #expect(uuid != nil, "\(text) parses as a UUID")
            if let bytes = uuid?.uuid {
                #expect(bytes.6 >> 4 == 4, "version 4")
                #expect(bytes.8 >> 6 == 0b10, "the RFC's variant")
            }
            seen.insert(text)
        }
        #expect(seen.count == 10_000)
    }
}
