import Foundation
import KioskCore
import KioskTransfer

/// The store's HTTP API as typed calls, over libcurl.
struct StoreAPI: Sendable {
    let server: String
    let http: HTTPClient
    /// The account token, for the calls that act for an account.
    var token: String?
    /// Told when the store answered as a Kiosk store (a JSON answer it could read).
    var answered: @Sendable () -> Void = {}

    func createAccount() async throws -> AccountCreated {
        try await call("POST", "/v1/accounts", body: Optional<String>.none)
    }

    // MARK: Sign-ins and devices

    func createAccount(signIn: SignInDetails) async throws -> AccountCreated {
        try await call("POST", "/v1/accounts", body: signIn)
    }

    func addSignIn(_ details: SignInDetails) async throws -> DeviceList {
        try await call("PUT", "/v1/account/sign-in", body: details)
    }

    func signIn(_ request: SignInRequest) async throws -> DeviceSignIn {
        try await call("POST", "/v1/sessions", body: request)
    }

    /// Revokes this device's token at the store.
    func signOut() async throws {
        _ = try await send("DELETE", "/v1/sessions/current", body: nil)
    }

    func devices() async throws -> DeviceList {
        try await call("GET", "/v1/devices")
    }

    func removeDevice(_ idOrName: String, force: Bool = false) async throws -> DeviceInfo {
        try await call("DELETE", "/v1/devices/" + (idOrName.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? idOrName) + (force ? "?force=true" : ""))
    }

    func startDeviceCode(deviceName: String?) async throws -> DeviceCodeGrant {
        try await call("POST", "/v1/device-codes", body: DeviceCodeRequest(deviceName: deviceName))
    }

    func takeDeviceCode(_ deviceCode: String) async throws -> DeviceSignIn {
        try await call("POST", "/v1/device-codes/token", body: DeviceCodeTokenRequest(deviceCode: deviceCode))
    }

    func exportAccount() async throws -> AccountExport {
        try await call("GET", "/v1/account/export")
    }

    func deleteAccount(password: String?) async throws -> AccountDeleted {
        struct Confirmation: Encodable { var password: String? }
        return try await call("DELETE", "/v1/account", body: Confirmation(password: password))
    }

    func resetPassword(_ request: PasswordResetRequest) async throws -> DeviceSignIn {
        try await call("POST", "/v1/account/password-reset", body: request)
    }

    func requestPasswordReset(email: String) async throws {
        let _: [String: String] = try await call("POST", "/v1/account/password-reset-request", body: PasswordResetMailRequest(email: email))
    }

    func setMailPreferences(_ preferences: MailPreferences) async throws -> MailPreferences {
        try await call("PUT", "/v1/account/mail", body: preferences)
    }

    func approveDeviceCode(_ userCode: String) async throws -> DeviceCodeApproved {
        try await call("POST", "/v1/device-codes/approve", body: DeviceCodeApproval(userCode: userCode))
    }

    func account() async throws -> AccountSummary {
        try await call("GET", "/v1/account")
    }

    func pay(_ request: PaymentRequest) async throws -> PaymentResponse {
        try await call("POST", "/v1/payments", body: request)
    }

    func redeem(_ request: RedemptionRequest) async throws -> PaymentResponse {
        try await call("POST", "/v1/redemptions", body: request)
    }

    func redeemCode(_ code: String) async throws -> RedeemCodeResponse {
        try await call("POST", "/v1/codes/redeem", body: RedeemCodeRequest(code: code))
    }

    func transactions(after cursor: String?) async throws -> TransactionPage {
        let query = cursor.map { "?after=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0)" } ?? ""
        return try await call("GET", "/v1/transactions" + query)
    }

    /// The account's change feed after `cursor`, held by the server up to `wait` seconds while
    /// nothing is after it (a long poll; the request's own timeout is longer).
    /// - Parameter catalog: the ETag of the catalog this device holds: the poll answers at once
    ///   when the store serves another, and is woken when it changes.
    func transactions(after cursor: String?, wait: Int, catalog: String? = nil) async throws -> TransactionPage {
        var query = "?wait=\(wait)"
        if let cursor { query += "&after=\(cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? cursor)" }
        if let catalog { query += "&catalog=\(catalog.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? catalog)" }
        return try await call("GET", "/v1/transactions" + query, timeout: wait + 30)
    }

    /// Whether the store answers at all (`GET /healthz`), whatever it answers.
    func isReachable() async -> Bool {
        do {
            _ = try await http.send(HTTPRequest(method: "GET", url: server + "/healthz", timeout: 10))
            return true
        } catch {
            return false
        }
    }

    /// Every transaction of the account, following the cursor to the end.
    func allTransactions() async throws -> [StoreTransaction] {
        try await changes(after: nil).transactions
    }

    /// The account's transactions that changed after `cursor` (all of them for nil), following
    /// the pages to the end, and the cursor after the last one.
    /// - Returns: also the tag of `GET /v1/store` the last page named (``TransactionPage/store``).
    func changes(after start: String?) async throws -> (transactions: [StoreTransaction], cursor: String?, storeTag: String?) {
        var all: [StoreTransaction] = []
        var cursor = start
        repeat {
            let page = try await transactions(after: cursor)
            all += page.transactions
            let next = page.cursor ?? cursor
            guard page.hasMore, next != cursor else { return (all, next, page.store) }
            cursor = next
        } while true
    }

    func finish(transactionId: String) async throws -> StoreTransaction {
        try await call("POST", "/v1/transactions/\(transactionId)/finish", body: Optional<String>.none)
    }

    func subscriptions() async throws -> SubscriptionList {
        try await call("GET", "/v1/subscriptions")
    }

    /// Auto-renew on (`resume`) or off (`cancel`) for the subscription with this original transaction ID.
    func setAutoRenew(_ originalTransactionId: String, on: Bool) async throws -> SubscriptionInfo {
        try await call("POST", "/v1/subscriptions/\(PathSegment.encode(originalTransactionId))/\(on ? "resume" : "cancel")", body: Optional<String>.none)
    }

    /// Sets the account's storefront (its country: prices, currency and tax).
    func setStorefront(_ storefront: String) async throws -> AccountSummary {
        try await call("PUT", "/v1/account/storefront", body: StorefrontChoice(storefront: storefront))
    }

    /// Moves the subscription to another plan of its group (``PlanChangeRequest``).
    func changePlan(_ originalTransactionId: String, _ request: PlanChangeRequest) async throws -> PlanChangeResult {
        try await call("POST", "/v1/subscriptions/\(PathSegment.encode(originalTransactionId))/change", body: request)
    }

    /// `GET /v1/store` and its entity tag; nil when the store answers that it is still the one
    /// tagged `known` (304).
    func storeDescription(unlessTagged known: String?) async throws -> (description: StoreDescription, tag: String?)? {
        let path = "/v1/store"
        let response = try await send("GET", path, body: nil, headers: known.map { [("If-None-Match", $0)] } ?? [])
        if response.status == 304 { return nil }
        do {
            let description = try JSONDecoder.kiosk.decode(StoreDescription.self, from: response.body)
            answered()
            return (description, response.headers["etag"])
        } catch {
            if let page = Self.webPage(response, url: server + path) { throw page }
            throw ClientError.badResponse(url: server + path, detail: "\(error)")
        }
    }

    func startCheckout(_ request: CheckoutRequest) async throws -> Checkout {
        try await call("POST", "/v1/checkouts", body: request)
    }

    func presentPlayPurchase(_ proof: PlayPurchaseProof) async throws -> ChannelPurchaseAnswer {
        try await call("POST", "/v1/play/purchases", body: proof)
    }

    func presentAppStoreTransaction(_ proof: AppStoreTransactionProof) async throws -> ChannelPurchaseAnswer {
        try await call("POST", "/v1/appstore/transactions", body: proof)
    }

    func jwks() async throws -> Data {
        try await send("GET", "/.well-known/jwks.json", body: nil).body
    }

    // MARK: Plumbing

    private func call<Response: Decodable>(_ method: String, _ path: String, timeout: Int = 60) async throws -> Response {
        try await call(method, path, body: Optional<String>.none, timeout: timeout)
    }

    private func call<Response: Decodable>(_ method: String, _ path: String, body: (some Encodable)?, timeout: Int = 60) async throws -> Response {
        let data = try body.map { try JSONEncoder.kiosk.encode($0) }
        let response = try await send(method, path, body: data ?? (method == "POST" ? Data("{}".utf8) : nil), timeout: timeout)
        let decoded: Response
        do {
            decoded = try JSONDecoder.kiosk.decode(Response.self, from: response.body)
        } catch {
            if let page = Self.webPage(response, url: server + path) { throw page }
            throw ClientError.badResponse(url: server + path, detail: "\(error)")
        }
        answered()
        return decoded
    }

    /// - Parameter conditional: fields such as `If-None-Match`; with any, a 304 is an answer.
    private func send(_ method: String, _ path: String, body: Data?, timeout: Int = 60,
                      headers conditional: [(name: String, value: String)] = []) async throws -> HTTPResponse {
        let url = server + path
        var headers: [(name: String, value: String)] = [("Accept", "application/json")] + conditional
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        var response: HTTPResponse
        var waits = 0
        repeat {
            do {
                response = try await http.send(HTTPRequest(method: method, url: url, headers: headers, body: body, timeout: timeout))
            } catch let error as TransferError where error.kind == .tooLarge {
                throw ClientError.badResponse(url: url, detail: "\(error.message); refused")
            } catch let error as TransferError where error.kind == .unreachable {
                throw ClientError.serverUnreachable(url: url, detail: error.message)
            } catch let error as TransferError {
                throw ClientError.answerLost(url: url, detail: error.message)
            }
            // A store that is rate limiting (429) or busy (503) says when to come back: a short wait
            // is waited here and the same request sent again (a payment keeps its idempotency key,
            // so it is never charged twice; a refused account creation created nothing). A longer
            // one is the caller's error to report, with the server's own "try again in N s".
            guard response.status == 429 || response.status == 503, waits < Self.maxRetryAfterWaits,
                  let seconds = RetryAfter.seconds(response.headers["retry-after"]), seconds <= Self.longestRetryAfterWait else { break }
            waits += 1
            try await Task.sleep(for: .seconds(seconds))
        } while true
        guard (200..<300).contains(response.status) || (response.status == 304 && !conditional.isEmpty) else {
            throw Self.error(from: response, url: url)
        }
        return response
    }

    /// How many times one call waits out a Retry-After before it reports the refusal.
    static let maxRetryAfterWaits = 3
    /// The longest Retry-After a call waits out by itself, in seconds.
    static let longestRetryAfterWait: TimeInterval = 10

    /// The error a non-2xx response stands for, with the server's own message when it sent one.
    static func error(from response: HTTPResponse, url: String) -> ClientError {
        if let body = try? JSONDecoder.kiosk.decode(APIError.self, from: response.body) {
            return .serverError(url: url, status: response.status, code: body.code, message: body.message)
        }
        if let page = webPage(response, url: url) { return page }
        return .serverError(url: url, status: response.status, code: "http_\(response.status)", message: oneLine(response.body))
    }

    /// An answer that is a web page (a proxy's error page, a web server's index, a captive portal)
    /// rather than a Kiosk store's JSON: one line saying what was reached, never the page itself.
    static func webPage(_ response: HTTPResponse, url: String) -> ClientError? {
        let type = response.headers["content-type"]?.lowercased() ?? ""
        let start = response.body.prefix(512).drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        guard type.contains("html") || start.first == UInt8(ascii: "<") else { return nil }
        let title = pageTitle(response.body).map { " (\"\($0)\")" } ?? ""
        return .notAStore(url: url, status: response.status, what: "a web page\(title)")
    }

    /// The page's `<title>`, when it has a short one.
    static func pageTitle(_ body: Data) -> String? {
        let text = String(decoding: body.prefix(4096), as: UTF8.self)
        guard let open = text.range(of: "<title>", options: .caseInsensitive),
              let close = text.range(of: "</title>", options: .caseInsensitive, range: open.upperBound..<text.endIndex) else { return nil }
        let title = text[open.upperBound..<close.lowerBound].split(whereSeparator: \.isWhitespace).joined(separator: " ")
        guard !title.isEmpty, title.count <= 80, title.allSatisfy({ !$0.isASCII || $0.isLetter || $0.isNumber || $0.isPunctuation || $0.isSymbol || $0 == " " }) else { return nil }
        return title
    }

    /// A short body as one line (control characters out, at most 200 characters): never a dump.
    static func oneLine(_ body: Data) -> String {
        let text = String(decoding: body.prefix(200), as: UTF8.self)
            .unicodeScalars.map { CharacterSet.controlCharacters.contains($0) ? " " : String($0) }.joined()
            .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        return text.isEmpty ? "no details" : text
    }
}

// MARK: Reading progress

extension StoreAPI {
    /// The account's last-known place in `productId` (OPDS Progression), or nil when no device has said one.
    func readingPosition(of productId: String) async throws -> ReadingPosition? {
        let (status, body) = try await progression("GET", productId, body: nil)
        // No place yet is a 200 with an empty payload (the draft's success codes).
        if status == 200, body.isEmpty { return nil }
        return try decodedPosition(status, body, productId)
    }

    /// Sends this device's place; returns the place kept, and whether it is this one (a newer one
    /// another device sent stays: the store answers 409 with it).
    func setReadingPosition(_ position: ReadingPosition, of productId: String) async throws -> (kept: ReadingPosition, stored: Bool) {
        let (status, body) = try await progression("PUT", productId, body: try JSONEncoder().encode(position))
        return (try decodedPosition(status, body, productId), status != 409)
    }

    /// The progression route's answers, 409 included (it carries the newer place).
    private func progression(_ method: String, _ productId: String, body: Data?) async throws -> (Int, Data) {
        let url = server + "/opds/progression/" + (productId.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? productId)
        var headers: [(name: String, value: String)] = [("Accept", "application/opds-progression+json")]
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        if body != nil { headers.append(("Content-Type", "application/opds-progression+json")) }
        let response: HTTPResponse
        do {
            response = try await http.send(HTTPRequest(method: method, url: url, headers: headers, body: body, timeout: 60))
        } catch let error as TransferError where error.kind == .unreachable {
            throw ClientError.serverUnreachable(url: url, detail: error.message)
        } catch let error as TransferError {
            throw ClientError.answerLost(url: url, detail: error.message)
        }
        guard (200..<300).contains(response.status) || response.status == 404 || response.status == 409 else {
            throw Self.error(from: response, url: url)
        }
        return (response.status, response.body)
    }

    private func decodedPosition(_ status: Int, _ body: Data, _ productId: String) throws -> ReadingPosition {
        guard let position = try? JSONDecoder().decode(ReadingPosition.self, from: body) else {
            throw ClientError.badResponse(url: server + "/opds/progression/" + productId, detail: "HTTP \(status) without a progression document")
        }
        answered()
        return position
    }
}
