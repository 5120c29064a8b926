import Foundation
import Testing
@testable import KioskCore

@Suite struct FileDigestTests {
    /// FIPS 180-2's test vectors, so the hex spelling is checked against digests known elsewhere.
    @Test func knownDigests() throws {
        #expect(FileDigest.sha256(of: Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(FileDigest.sha256(of: Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("digest-\(UUID().uuidString)")
        try Data("abc".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(try FileDigest.sha256(of: file) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func everyByteHasTwoDigits() {
        let all = FileDigest.hex((0...255).map(UInt8.init))
        #expect(all.count == 512)
        #expect(all.hasPrefix("000102"))
        #expect(all.contains("0a0b0c0d0e0f10"))
        #expect(all.hasSuffix("fdfeff"))
    }
}
