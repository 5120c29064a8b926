/// The JSON body of every error response: a stable code and a sentence for a person.
public struct APIError: Codable, Sendable, Error, Equatable, CustomStringConvertible {
    public var code: String
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
