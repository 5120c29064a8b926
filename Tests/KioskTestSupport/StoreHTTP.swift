import Foundation
import KioskCore
import KioskTransfer

/// Raw calls to a live store, as a third party (or its operator) would make them.
public struct StoreHTTP: Sendable {
    public let baseURL: String

    public init(baseURL: String) {
        self.baseURL = baseURL
    }

    public struct Reply: Sendable {
        public var status: Int
        public var body: Data
        public var headers: [String: String] = [:]

        public init(status: Int, body: Data, headers: [String: String] = [:]) {
            self.status = status
            self.body = body
            self.headers = headers
        }

        /// A header's value, its name in any case.
        public func header(_ name: String) -> String? {
            headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
        }

        public func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONDecoder.kiosk.decode(T.self, from: body)
        }
    }

    /// - Parameter authorization: the whole `Authorization` header, sent instead of `Bearer <token>`.
    /// - Parameter headers: more header fields, sent as given.
    public func send(_ method: String, _ path: String, token: String? = nil, authorization: String? = nil, json: String? = nil,
                     headers extra: [(name: String, value: String)] = []) async throws -> Reply {
        var headers: [(name: String, value: String)] = extra
        if let header = authorization ?? token.map({ "Bearer \($0)" }) { headers.append(("Authorization", header)) }
        let body = json.map { Data($0.utf8) } ?? (method == "POST" ? Data("{}".utf8) : nil)
        let response = try await HTTPClient().send(HTTPRequest(method: method, url: baseURL + path, headers: headers, body: body))
        return Reply(status: response.status, body: response.body, headers: response.headers)
    }

    public func createAccount() async throws -> AccountCreated {
        try await send("POST", "/v1/accounts").decode(AccountCreated.self)
    }

    public func pay(_ productId: String, token: String, method: PaymentMethod = .approve, quantity: Int = 1, key: String = UUID().uuidString) async throws -> Reply {
        try await send("POST", "/v1/payments", token: token, json: """
            {"productId": "\(productId)", "quantity": \(quantity), "paymentMethod": "\(method.rawValue)", "idempotencyKey": "\(key)"}
            """)
    }

    /// Charges recorded for an account, through the admin view.
    public func charges(accountId: String, adminToken: String) async throws -> [Int] {
        let reply = try await send("GET", "/v1/admin/accounts/\(accountId)", token: adminToken)
        let object = try JSONSerialization.jsonObject(with: reply.body) as? [String: Any]
        let charges = object?["charges"] as? [[String: Any]] ?? []
        return charges.compactMap { $0["amountCents"] as? Int }
    }

    public func verifyReceipt(_ receipt: String, token: String? = nil) async throws -> VerifyReceiptResponse {
        let data = Data(receipt.utf8).base64EncodedString()
        return try await send("POST", "/verifyReceipt", token: token, json: "{\"receipt-data\": \"\(data)\"}").decode(VerifyReceiptResponse.self)
    }
}
