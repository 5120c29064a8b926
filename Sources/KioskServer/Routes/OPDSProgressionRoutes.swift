import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore

/// OPDS Progression 1.0 (the OPDS community's draft: `http://opds-spec.org/progression`,
/// `application/opds-progression+json`) on each publication an account owns, for
/// Thorium/Cantook-class apps, over the same stored positions as KOReader's sync
/// (``ReadingProgress``): a place written by either is read by both.
///
/// `GET /opds/progression/{id}` answers the last-known progression (200 with an empty payload when
/// none, as the draft's success codes have it). `PUT` sends
/// the app's, dated by its `modified`: kept unless the one the store has is newer, when the answer
/// is 409 with that one, for the app to offer the reader. Credentials as the shelf's (a device's
/// Bearer token or Basic), 401 with the challenge without them, 403 for a publication the account
/// does not own.
struct OPDSProgressionRoutes: Sendable {
    static let type = "application/opds-progression+json"

    let store: Store
    let catalog: CatalogService
    let limits: RateLimitGate

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.get("opds/progression/:id", use: read)
        routes.put("opds/progression/:id", use: update)
        return routes
    }

    typealias Document = ReadingPosition

    @Sendable func read(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let (accountId, product) = try await owned(request, context: context) else { return try OPDSRoutes.challenge() }
        guard let position = try await store.reading.position(accountId: accountId, key: "product:" + product.id, document: product.id) else {
            var nothing = Response(status: .ok)
            nothing.headers[.contentLength] = "0"
            nothing.headers[.cacheControl] = "private, no-store"
            return nothing
        }
        return try Self.answer(Self.document(position), status: .ok)
    }

    @Sendable func update(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let (accountId, product) = try await owned(request, context: context) else { return try OPDSRoutes.challenge() }
        let sent = try await JSONBody.decode(Document.self, from: request)
        guard let said = Self.date(sent.modified), (Self.earliest...Self.latest).contains(said) else {
            throw APIFailure.badRequest("the field \"modified\" must be an ISO 8601 date and time from 2000 to 2200, such as 2026-01-27T11:00:00Z")
        }
        // A date ahead of the store's clock counts as now: a device whose clock runs fast (or a
        // date of year 99999) would otherwise make every later place stale until then.
        let modified = min(said, Date())
        guard sent.progression.isFinite, (0...1).contains(sent.progression) else { throw APIFailure.badRequest("the field \"progression\" must be from 0 to 1") }
        guard KOSyncRoutes.isField(sent.device.id, upTo: 256), KOSyncRoutes.isField(sent.device.name, upTo: 128) else {
            throw APIFailure.badRequest("the fields \"device.id\" and \"device.name\" must be 1 to 256 and 1 to 128 visible characters")
        }
        guard Self.isURI(sent.device.id) else {
            throw APIFailure.badRequest("the field \"device.id\" must be a URI, such as urn:uuid:019c0047-cc8d-7ec4-a3c3-938ccadc020a")
        }
        let references = sent.references ?? []
        guard references.count <= 20, references.allSatisfy({ KOSyncRoutes.isField($0, upTo: 1_024) }) else {
            throw APIFailure.badRequest("the field \"references\" holds at most 20 references of 1 to 1024 bytes of visible text")
        }
        if let title = sent.title, !KOSyncRoutes.isField(title, upTo: 256) {
            throw APIFailure.badRequest("the field \"title\" must be 1 to 256 bytes of visible text")
        }
        // Every reference kept as sent, for the apps that follow them; KOReader is handed the one it can go to.
        let position = ReadingProgress.Position(document: product.id, progress: Self.progress(from: references), percentage: sent.progression,
                                                device: sent.device.name, deviceId: sent.device.id, timestamp: Int64(modified.timeIntervalSince1970),
                                                references: references.isEmpty ? nil : references, title: sent.title)
        let (kept, stored) = try await store.reading.recordDated(position, accountId: accountId, key: "product:" + product.id)
        return try Self.answer(Self.document(kept), status: stored ? .ok : .conflict)
    }

    /// The account asking and the publication it owns, or nil when it sent no credentials.
    private func owned(_ request: Request, context: KioskRequestContext) async throws -> (String, Product)? {
        let id = try context.parameters.require("id")
        // What a reading app opens (``Storefront/readableInApps()``): an archive is the Kiosk client's.
        guard let product = try await catalog.current.products[id], product.content?.format.deliveredAsFile == true else {
            throw APIFailure(.notFound, code: "unknown_product", message: "no publication \"\(ProductID.printable(id))\" here")
        }
        guard let accountId = try await OPDSRoutes.account(request, context: context, store: store, limits: limits) else { return nil }
        let free = (Price.cents(product.price.amount) ?? 1) == 0 && product.kind == .nonConsumable
        let owns = try await free ? true : store.receipts.accountOwns(accountId, product)
        guard owns else {
            throw APIFailure(.forbidden, code: "not_entitled", message: "this account does not own \(id)")
        }
        return (accountId, product)
    }

    /// An absolute URI as RFC 3986 writes one: a scheme (a letter, then letters, digits, `+`, `-`,
    /// `.`), a colon, and something after it, with no space.
    static func isURI(_ text: String) -> Bool {
        let scalars = Array(text.unicodeScalars)
        guard let colon = scalars.firstIndex(of: ":"), colon > 0, colon < scalars.count - 1, !scalars.contains(" "),
              scalars[0].isASCII, CharacterSet.letters.contains(scalars[0]) else { return false }
        return scalars[..<colon].allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "+-.".unicodeScalars.contains($0)) }
    }

    static let earliest = Date(timeIntervalSince1970: 946_684_800)   // 2000-01-01
    static let latest = Date(timeIntervalSince1970: 7_258_118_400)    // 2200-01-01

    /// An ISO 8601 date and time, with or without fractional seconds (`toISOString()` in every
    /// browser-based reader writes milliseconds).
    static func date(_ text: String) -> Date? {
        (try? Date(text, strategy: .iso8601)) ?? (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
    }

    /// The place KOReader is handed from the references: a PDF's `#page=N` (1 to a million) as
    /// KOReader keeps a page, its number; else a KOReader XPointer (`/body/…`) an app passed on;
    /// else the first reference, which KOReader's sync does not hand on (``KOSyncRoutes``).
    static func progress(from references: [String]) -> String {
        if let reference = references.first(where: { $0.hasPrefix("#page=") }), let page = Int(reference.dropFirst("#page=".count)),
           (1...1_000_000).contains(page), reference == "#page=\(page)" {
            return String(page)
        }
        return references.first { $0.hasPrefix("/body/") } ?? references.first ?? ""
    }

    /// A stored position as a progression document: an app's own references and title as it sent
    /// them; KOReader's page number as `#page=N`; its device ID as a URI.
    static func document(_ position: ReadingProgress.Position) -> Document {
        let references: [String]? = position.references ?? (Int(position.progress) != nil ? ["#page=" + position.progress] : nil)
        // KOReader's device ID is bare hex; whatever is not a URI becomes one, so the draft's `id` always is.
        let unreserved = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
        let deviceId = isURI(position.deviceId) ? position.deviceId
            : "urn:kosync:" + (position.deviceId.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "unknown")
        let modified = Date(timeIntervalSince1970: TimeInterval(position.timestamp)).formatted(.iso8601)
        return Document(title: position.title, modified: modified, device: .init(id: deviceId, name: position.device), progression: position.percentage, references: references)
    }

    static func answer(_ document: Document, status: HTTPResponse.Status) throws -> Response {
        var response = try JSONBody.response(document, status: status)
        response.headers[.contentType] = type
        response.headers[.cacheControl] = "private, no-store"
        return response
    }
}
