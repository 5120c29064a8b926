import Foundation
import Hummingbird

/// The two OPDS formats the store speaks from one model (``OPDSFeeds``): 2.0 (JSON) at `/opds`,
/// 1.2 (Atom, ``OPDSAtom``) at `/opds/v1.2`. `/opds` itself answers the one the app's `Accept`
/// asks for, so a reader types one address into any app.
enum OPDSFormat: CaseIterable, Sendable {
    case v2, v1_2

    /// Where this format's feeds are.
    var root: String {
        switch self {
        case .v2: "/opds"
        case .v1_2: "/opds/v1.2"
        }
    }

    /// The other format's root and its type, for the `alternate` link between the two roots.
    var other: (root: String, type: String) {
        switch self {
        case .v2: (OPDSFormat.v1_2.root, OPDSAtom.navigationType)
        case .v1_2: (OPDSFormat.v2.root, OPDSFeeds.feedType)
        }
    }

    /// The format `Accept` prefers: 1.2 when it ranks Atom above OPDS 2.0's JSON (KyBook, Moon+
    /// Reader and calibre send `application/atom+xml`), else 2.0, the store's own.
    static func preferred(by accept: String?) -> OPDSFormat {
        guard let accept else { return .v2 }
        var atom = 0.0, json = 0.0
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let type = parts.first else { continue }
            let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            switch type {
            case "application/atom+xml": atom = max(atom, quality)
            case "application/opds+json", "application/json": json = max(json, quality)
            default: break
            }
        }
        return atom > json ? .v1_2 : .v2
    }
}
