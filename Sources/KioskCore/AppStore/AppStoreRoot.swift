import Foundation
import SwiftASN1
import X509

/// A root certificate App Store signed data must chain to (pinned: the one in the proof's own
/// `x5c` is never trusted by itself).
public struct AppStoreRoot: Sendable, Equatable {
    let certificate: Certificate

    init(certificate: Certificate) {
        self.certificate = certificate
    }

    /// A root from its DER bytes (a `.cer` or `.der` file).
    /// - Throws: ``AppStoreRootError`` when the bytes are not a certificate.
    public init(derEncoded bytes: Data, source: String = "the root certificate") throws(AppStoreRootError) {
        do {
            certificate = try Certificate(derEncoded: Array(bytes))
        } catch {
            // The parser's own error names its source file and line, which say nothing to an operator.
            throw AppStoreRootError(message: "\(source) is not a DER-encoded X.509 certificate; give the .cer file Apple publishes, or convert a PEM one with openssl x509 -outform der")
        }
    }

    /// A root from its PEM text.
    public init(pemEncoded text: String, source: String = "the root certificate") throws(AppStoreRootError) {
        do {
            certificate = try Certificate(pemEncoded: text)
        } catch {
            throw AppStoreRootError(message: "\(source) is not a PEM X.509 certificate")
        }
    }

    /// Apple Root CA - G3, the root of every App Store signing chain (shipped in ``AppleRootCertificates``).
    public static var appleRootCAG3: AppStoreRoot {
        get throws(AppStoreRootError) {
            try AppStoreRoot(pemEncoded: AppleRootCertificates.appleRootCAG3PEM, source: "Kiosk's copy of Apple Root CA - G3")
        }
    }

    /// The certificate's DER bytes.
    public func derEncoded() throws -> Data {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Data(serializer.serializedBytes)
    }

    /// The certificate's subject, as a distinguished name string.
    public var subject: String { certificate.subject.description }
}

/// A root certificate that cannot be read.
public struct AppStoreRootError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
