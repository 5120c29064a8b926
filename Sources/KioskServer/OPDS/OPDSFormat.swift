import Foundation
import Hummingbird

/// The two OPDS formats the store speaks from one model (``OPDSFeeds``): 2.0 (JSON) under
/// `/opds` with its root at `/opds/v2`, 1.2 (Atom, ``OPDSAtom``) under `/opds/v1.2`. `/opds` itself
/// answers the one the app's `Accept` asks for (``preferred(by:)``), so a reader types one address
/// into any app.
enum OPDSFormat: CaseIterable, Sendable {
    case v2, v1_2

    /// Where this format's feeds are.
    var root: String {
        switch self {
        case .v2: "/opds"
        case .v1_2: "/opds/v1.2"
        }
    }

    /// This format's root feed, whatever an app's `Accept` says: the `start` and `self` its feeds
    /// link, so an app that sent no `Accept` at `/opds` is not handed the other format on its way back.
    var start: String {
        switch self {
        case .v2: "/opds/v2"
        case .v1_2: "/opds/v1.2"
        }
    }

    /// The other format's root and its type, for the `alternate` link between the two roots.
    var other: (root: String, type: String) {
        switch self {
        case .v2: (OPDSFormat.v1_2.start, OPDSAtom.navigationType)
        case .v1_2: (OPDSFormat.v2.start, OPDSFeeds.feedType)
        }
    }

    /// The format `Accept` prefers: the OPDS type it ranks highest, the first named on a tie
    /// (KOReader since July 2026 sends `application/opds+json, application/atom+xml;profile=opds-catalog, */*`,
    /// preferring 2.0). An `Accept` that names neither, or none at all, gets 1.2: every OPDS app
    /// reads Atom, and the ones that send no `Accept` (KOReader before then, Librera) read only Atom.
    static func preferred(by accept: String?) -> OPDSFormat {
        var best: (format: OPDSFormat, quality: Double)?
        for range in (accept ?? "").split(separator: ",") {
            let parts = range.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let type = parts.first else { continue }
            let quality = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            let format: OPDSFormat
            switch type {
            case "application/atom+xml": format = .v1_2
            case "application/opds+json", "application/json": format = .v2
            default: continue
            }
            if quality > 0, quality > (best?.quality ?? 0) { best = (format, quality) }
        }
        return best?.format ?? .v1_2
    }
}
