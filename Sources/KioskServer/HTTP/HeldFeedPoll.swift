import Foundation
import HTTPTypes
import KioskCore
import KioskStore
import Logging
import NIOCore

/// The store whose change feed's long polls ``BytesResponder`` holds, and the tag its pages name.
struct HeldFeed: Sendable {
    let store: Store
    /// ``StoreDescription/entityTag`` (``TransactionPage/store``).
    let storeTag: String
}

/// A long poll of the account change feed (`GET /v1/transactions?wait=`) held on the event loop
/// by ``BytesResponder``, not in a task of the HTTP stack.
///
/// Replaces, for a waiting device, the router's path through Hummingbird: there a poll held a task
/// suspended under the whole middleware chain, plus a timer task, and a connection kept the stack
/// slabs of its deepest request for as long as it lived (Swift's task allocator does not give them
/// back): 38–44 KiB of server memory a waiting device, of which 23 KiB were those slabs
/// (`heaptrack` of 2,000 waiting polls, 2026-11-30; docs/benchmarks.md section 8). Here a waiting
/// poll is this value, a ``ChangeNotifier/Waiter`` with its closure, and a timer in the event
/// loop's queue; the reads run in a short task that ends before the wait.
///
/// What stays the same as the route (``AccountRoutes``): the answer's JSON, the one-line refusals,
/// the log line and metrics under the same route, and the order of events: the waiter is
/// registered before the read, a change of the account's transactions that brings nothing after
/// the cursor waits out the rest, any other wake answers what is there, and a device removed
/// while its poll waited is told so when it ends. A poll the stack answers is no different (one
/// with a field ``RawGet`` does not certainly read, a `HEAD`, a malformed `wait` or `after`, a
/// connection already handed over).
struct HeldFeedPoll: Sendable {
    static let route = "/v1/transactions"

    let token: String
    let after: String?
    let catalog: String?
    let wait: Duration

    /// The poll `request` asks for, or nil when the stack must answer it (see the type).
    init?(_ request: RawGet) {
        guard !request.isHead, request.target.utf8.starts(with: "\(Self.route)?".utf8),
              let token = request.bearerToken,
              let items = URLComponents(string: request.target)?.queryItems,
              let waitText = items.first(where: { $0.name == "wait" })?.value,
              let seconds = Int(waitText), seconds >= 0
        else { return nil }
        let after = items.first(where: { $0.name == "after" })?.value
        // A bad cursor's 400 is the route's to write.
        if let after, !after.isEmpty, Int64(after).map({ $0 < 0 }) ?? true { return nil }
        self.token = token
        self.after = after
        self.catalog = items.first(where: { $0.name == "catalog" })?.value
        self.wait = .seconds(min(seconds, AccountRoutes.longestWait))
    }

    /// What the poll does next, decided off the event loop.
    enum Step: Sendable {
        case answer(Answer)
        /// Nothing yet: wait on `waiter` (registered before the read), then ask ``afterWake(_:account:deadline:feed:logger:)``.
        case wait(ChangeNotifier.Waiter, account: String)
    }

    /// A whole answer: status, the fields an error adds, and the JSON body.
    struct Answer: Sendable {
        var status: HTTPResponse.Status
        var fields: [(String, String)] = []
        var body: Data
        var account: String?
    }

    /// The first look: the device's token, then the feed.
    func firstLook(_ feed: HeldFeed, logger: Logger) async -> Step {
        let store = feed.store
        do {
            guard let device = try await store.accounts.device(forToken: token), device.kind == .app else {
                return .answer(Self.failure(APIFailure.unauthorized(
                    "this call needs Authorization: Bearer <account token> of an account this store knows"), account: nil, logger: logger))
            }
            return try await look(account: device.accountId, feed: feed)
        } catch {
            return .answer(Self.failure(error, account: nil, logger: logger))
        }
    }

    /// After the waiter woke: a change of the account's transactions before the deadline looks
    /// again; anything else answers what is there now.
    func afterWake(_ reason: ChangeNotifier.Wake, account: String, deadline: NIODeadline, feed: HeldFeed, logger: Logger) async -> Step {
        do {
            if reason == .transactions, NIODeadline.now() < deadline { return try await look(account: account, feed: feed) }
            if reason == .timeout { return .answer(try await answer(try await feed.store.accounts.quietPage(after: after), account: account, feed: feed)) }
            return .answer(try await answer(try await feed.store.accounts.page(accountId: account, after: after), account: account, feed: feed))
        } catch {
            return .answer(Self.failure(error, account: account, logger: logger))
        }
    }

    private func look(account: String, feed: HeldFeed) async throws -> Step {
        switch try await feed.store.accounts.lookForChanges(accountId: account, after: after, catalog: catalog) {
        case .page(let page): .answer(try await answer(page, account: account, feed: feed))
        case .wait(let waiter): .wait(waiter, account: account)
        }
    }

    /// The page, unless the device was removed meanwhile (the removal woke the poll).
    private func answer(_ page: TransactionPage, account: String, feed: HeldFeed) async throws -> Answer {
        guard try await feed.store.accounts.device(forToken: token)?.kind == .app else { throw StoreError.signedOut }
        var page = page
        page.store = feed.storeTag
        return Answer(status: .ok, body: try JSONEncoder.kiosk.encode(page), account: account)
    }

    /// The refusal the router would write for `error` (``RequestLogMiddleware/answer(for:route:logger:)``).
    static func failure(_ error: any Error, account: String?, logger: Logger) -> Answer {
        let answered = RequestLogMiddleware.answer(for: error, route: route, logger: logger)
        let failure: APIFailure = switch answered {
        case let failure as APIFailure: failure
        case let refusal as StoreError: APIFailure(refusal.status, code: refusal.code, message: refusal.message, retryAfter: refusal.retryAfter)
        default: APIFailure(.internalServerError, code: "internal", message: "the store failed to answer this request; its log says why")
        }
        var fields = [("X-Content-Type-Options", "nosniff")]
        if failure.status == .unauthorized { fields.append(("WWW-Authenticate", "Bearer")) }
        if let retryAfter = failure.retryAfter { fields.append(("Retry-After", String(retryAfter))) }
        let body = (try? JSONEncoder.kiosk.encode(APIError(code: failure.code, message: failure.message))) ?? Data()
        return Answer(status: failure.status, fields: fields, body: body, account: account)
    }

    /// The answer as bytes on the wire, with the fields Hummingbird writes for the route's.
    static func encode(_ answer: Answer, date: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        var bytes = allocator.buffer(capacity: 160 + answer.body.count)
        bytes.writeString("HTTP/1.1 \(answer.status.code) \(answer.status.reasonPhrase)\r\nContent-Type: application/json\r\n")
        for (name, value) in answer.fields { bytes.writeString("\(name): \(value)\r\n") }
        bytes.writeString("Content-Length: \(answer.body.count)\r\nDate: \(date)\r\nServer: kiosk\r\n\r\n")
        bytes.writeBytes(answer.body)
        return bytes
    }
}

/// A held poll's state on the event loop, between its task's looks.
final class HeldPollState {
    let poll: HeldFeedPoll
    let line: RequestLine
    let deadline: NIODeadline
    var waiter: ChangeNotifier.Waiter?
    var timeout: Scheduled<Void>?

    init(poll: HeldFeedPoll, line: RequestLine) {
        self.poll = poll
        self.line = line
        self.deadline = .now() + .nanoseconds(Int64(poll.wait.components.seconds) * 1_000_000_000)
    }
}
