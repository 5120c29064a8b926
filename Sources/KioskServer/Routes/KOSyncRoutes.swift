import Foundation
import HTTPTypes
import Hummingbird
import KioskCore
import KioskStore

/// A progress sync server KOReader speaks to (its kosync plugin; Komga, Kavita and Readest serve
/// the same), at the store's own address: a reader sets the plugin's server to the store and
/// signs in with the account's email and a sync password made on `/account`.
///
/// Followed from KOReader's `plugins/kosync.koplugin/api.json` (the paths, methods, parameters
/// and expected statuses) and `KOSyncClient.lua` (the headers: `accept:
/// application/vnd.koreader.v1+json`, `x-auth-user`, `x-auth-key`, the latter the MD5 of the
/// password typed):
///
/// | route | answer |
/// |---|---|
/// | `GET /users/auth` | 200 `{"authorized": "OK"}`, 401 |
/// | `POST /users/create` | 402: accounts are made in the shop, not by the plugin |
/// | `PUT /syncs/progress` `{document, progress, percentage, device, device_id}` | 200 `{document, timestamp}`, 401 |
/// | `GET /syncs/progress/:document` | 200 with the position (`{}` when none), 401 |
/// | `GET /healthcheck` | 200 `{"state": "OK"}` |
struct KOSyncRoutes: Sendable {
    let store: Store
    let catalog: CatalogService
    let limits: RateLimitGate

    func collection() -> RouteCollection<KioskRequestContext> {
        let routes = RouteCollection(context: KioskRequestContext.self)
        routes.get("users/auth", use: authorize)
        routes.post("users/create", use: register)
        routes.put("syncs/progress", use: update)
        routes.get("syncs/progress/:document", use: read)
        routes.get("healthcheck") { _, _ in try Self.json(["state": "OK"]) }
        return routes
    }

    /// A position as KOReader writes it (without `timestamp`: the store dates it) and reads it.
    struct Position: Codable {
        var document: String
        var progress: String
        var percentage: Double
        var device: String
        var deviceId: String
        var timestamp: Int64?

        enum CodingKeys: String, CodingKey {
            case document, progress, percentage, device, timestamp
            case deviceId = "device_id"
        }

        init(_ position: ReadingProgress.Position) {
            (document, progress, percentage, device, deviceId, timestamp) = (position.document, position.progress, position.percentage, position.device,
                                                                            position.deviceId, position.timestamp)
        }
    }

    @Sendable func authorize(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard try await account(request, context: context) != nil else { return try Self.unauthorized() }
        return try Self.json(["authorized": "OK"])
    }

    @Sendable func register(_ request: Request, context: KioskRequestContext) async throws -> Response {
        // 402 is what the plugin expects when it cannot register ("username is already registered").
        try Self.json(["message": "Create an account in the store's shop, then make a sync password on its account page (/account); sign in here with your email and that password."],
                      status: HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required"))
    }

    @Sendable func update(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let accountId = try await account(request, context: context) else { return try Self.unauthorized() }
        let update = try await JSONBody.decode(Position.self, from: request)
        try Self.check(update)
        let key = try await store.reading.key(of: update.document, current: try await catalog.current.productsByDocument)
        let stored = try await store.reading.record(accountId: accountId, key: key, document: update.document, progress: update.progress,
                                                    percentage: update.percentage, device: update.device, deviceId: update.deviceId)
        struct Stored: Encodable { var document: String; var timestamp: Int64 }
        return try JSONBody.response(Stored(document: update.document, timestamp: stored.timestamp))
    }

    @Sendable func read(_ request: Request, context: KioskRequestContext) async throws -> Response {
        guard let accountId = try await account(request, context: context) else { return try Self.unauthorized() }
        let document = try context.parameters.require("document")
        guard KOReaderDigest.isDigest(document) else { throw APIFailure.badRequest("the document must be KOReader's name of the file: 32 lowercase hex digits") }
        let key = try await store.reading.key(of: document, current: try await catalog.current.productsByDocument)
        // A place KOReader cannot go to (an OPDS app's percentage alone, or its reference into an
        // EPUB's chapter) is no place to it: KOReader goes to an XPointer (`/body/…`) or a page.
        guard let position = try await store.reading.position(accountId: accountId, key: key, document: document),
              position.progress.hasPrefix("/") || Int(position.progress) != nil else {
            return try Self.json([:])
        }
        return try JSONBody.response(Position(position))
    }

    /// The account a sync password signs in: `x-auth-key` is the MD5 of the password, a device
    /// of kind `sync`; `x-auth-user` must be that account's email. A wrong pair is counted against
    /// the client's address (``RateLimitGate/admitKeyAttempt(_:context:)``), so keys cannot be tried at speed.
    func account(_ request: Request, context: KioskRequestContext) async throws -> String? {
        guard let user = Self.header("x-auth-user", request), let key = Self.header("x-auth-key", request)?.lowercased() else { return nil }
        try limits.refuseWhileKeysLimited(request, context: context)
        if KOReaderDigest.isDigest(key), let device = try await store.accounts.device(forToken: key), device.kind == .sync,
           let owner = try await store.accounts.account(email: user), owner == device.accountId {
            return device.accountId
        }
        try await limits.admitKeyAttempt(request, context: context)
        return nil
    }

    static func check(_ update: Position) throws {
        guard KOReaderDigest.isDigest(update.document) else {
            throw APIFailure.badRequest("the field \"document\" must be KOReader's name of the file: 32 lowercase hex digits")
        }
        guard isField(update.device, upTo: 128), isField(update.deviceId, upTo: 128) else {
            throw APIFailure.badRequest("the fields \"device\" and \"device_id\" must be 1 to 128 visible characters")
        }
        guard isField(update.progress, upTo: 4_096) else { throw APIFailure.badRequest("the field \"progress\" must be 1 to 4096 bytes of visible text") }
        guard update.percentage.isFinite, (0...1).contains(update.percentage) else { throw APIFailure.badRequest("the field \"percentage\" must be a fraction from 0 to 1") }
    }

    /// Text a device names itself or a book by: no control or format character, within `limit`.
    static func isField(_ text: String, upTo limit: Int) -> Bool {
        !text.isEmpty && text.utf8.count <= limit && text.unicodeScalars.contains { !$0.properties.isWhitespace } && !text.unicodeScalars.contains { scalar in
            [.control, .format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory)
        }
    }

    static func header(_ name: String, _ request: Request) -> String? {
        HTTPField.Name(name).flatMap { request.headers[$0] }.flatMap { $0.isEmpty ? nil : $0 }
    }

    static func unauthorized() throws -> Response {
        try json(["message": "Unauthorized: sign in with your account's email and a sync password made on the store's account page"], status: .unauthorized)
    }

    static func json(_ value: [String: String], status: HTTPResponse.Status = .ok) throws -> Response {
        try JSONBody.response(value, status: status)
    }
}
