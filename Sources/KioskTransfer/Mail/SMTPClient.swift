import CCurl
import Foundation

/// Where the store's mail goes: an SMTP server, as `--smtp-url` names it.
public struct SMTPServer: Sendable, Equatable {
    /// `smtp://host[:port]` (STARTTLS whenever the server offers it, required with credentials
    /// off this machine) or `smtps://host[:port]` (TLS from the first byte).
    public var url: String
    public var username: String?
    public var password: String?
    /// How long one message may take, connection included.
    public var timeout: Int

    /// - Throws: ``TransferError`` for a URL that is not `smtp://` or `smtps://` with a host.
    public init(url: String, username: String? = nil, password: String? = nil, timeout: Int = 30) throws {
        guard let parsed = URL(string: url), ["smtp", "smtps"].contains(parsed.scheme?.lowercased() ?? ""), parsed.host?.isEmpty == false else {
            throw TransferError(url: url, kind: .failed, message: "is not an smtp:// or smtps:// URL with a host")
        }
        // Credentials in the URL would be logged with it: they come from a file or a variable.
        guard parsed.user == nil, parsed.password == nil else {
            throw TransferError(url: "smtp URL", kind: .failed, message: "carries credentials; give them with --smtp-user and --smtp-password-file (or KIOSK_SMTP_PASSWORD) instead")
        }
        (self.url, self.username, self.password, self.timeout) = (url, username, password, timeout)
    }

    /// Whether the server is this machine, where a password may cross without TLS (a local relay, a test's).
    var isLoopback: Bool {
        let host = URL(string: url)?.host?.lowercased() ?? ""
        return host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }
}

/// One plain-text message: addresses, subject and body, as RFC 5322 wants them on the wire.
public struct MailMessage: Sendable, Equatable {
    public var from: String
    /// The sender's display name (`Kiosk <store@example.com>`).
    public var fromName: String?
    public var to: String
    public var subject: String
    public var body: String
    /// `<…@host>`: the same message sent twice (a retry after a lost answer) has one ID.
    public var messageId: String
    public var date: Date

    public init(from: String, fromName: String? = nil, to: String, subject: String, body: String, messageId: String, date: Date) {
        (self.from, self.fromName, self.to, self.subject, self.body, self.messageId, self.date) = (from, fromName, to, subject, body, messageId, date)
    }

    /// The message as sent: headers (a subject that is not ASCII as an RFC 2047 encoded word, no
    /// line breaks in any header), a blank line, the body in UTF-8 with CRLF line ends.
    public var wire: Data {
        func header(_ text: String) -> String { text.replacingOccurrences(of: "\r", with: " ").replacingOccurrences(of: "\n", with: " ") }
        // A header line stays well under RFC 5322's 998 characters: a subject is cut at 150, and
        // one that is not ASCII goes as encoded words of at most 75 characters (RFC 2047), each
        // on a folded line of its own, split between characters.
        func encoded(_ text: String, limit: Int = 150) -> String {
            var clean = header(text)
            if clean.count > limit { clean = String(clean.prefix(limit - 1)) + "…" }
            guard !clean.allSatisfy(\.isASCII) else { return clean }
            var words: [String] = []
            var chunk = ""
            for character in clean {
                if chunk.utf8.count + String(character).utf8.count > 45 {
                    words.append(chunk)
                    chunk = ""
                }
                chunk.append(character)
            }
            if !chunk.isEmpty { words.append(chunk) }
            return words.map { "=?UTF-8?B?\(Data($0.utf8).base64EncodedString())?=" }.joined(separator: "\r\n ")
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        let sender = fromName.map { "\(encoded($0)) <\(header(from))>" } ?? "<\(header(from))>"
        let lines = [
            "Date: \(formatter.string(from: date))",
            "From: \(sender)",
            "To: <\(header(to))>",
            "Subject: \(encoded(subject))",
            "Message-ID: \(header(messageId))",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: 8bit",
            "",
        ]
        let text = body.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: "\r\n")
        return Data((lines.joined(separator: "\r\n") + "\r\n" + text + (text.hasSuffix("\r\n") ? "" : "\r\n")).utf8)
    }
}

/// Sends mail with libcurl's SMTP (STARTTLS or SMTPS, AUTH, dot-stuffing: none of it written here).
/// Blocking: run it off Swift's cooperative threads.
public enum SMTPClient {
    /// Sends `message` through `server`.
    /// - Throws: ``TransferError``: the server unreachable or refusing (a retry may succeed).
    public static func send(_ message: MailMessage, via server: SMTPServer) throws {
        let easy = try CurlEasy(url: server.url)
        try easy.set(CURLOPT_PROTOCOLS_STR, "smtp,smtps")
        try easy.set(CURLOPT_MAIL_FROM, "<\(message.from)>")
        try easy.setRecipients([message.to])
        try easy.set(CURLOPT_UPLOAD, 1)
        try easy.set(CURLOPT_TIMEOUT, server.timeout)
        try easy.set(CURLOPT_CONNECTTIMEOUT, min(10, server.timeout))
        if let username = server.username { try easy.set(CURLOPT_USERNAME, username) }
        if let password = server.password { try easy.set(CURLOPT_PASSWORD, password) }
        // A password never crosses the network in clear: STARTTLS is then required, except to
        // this machine. Without credentials TLS is used whenever the server offers it.
        let requireTLS = server.password != nil && !server.isLoopback
        try easy.set(CURLOPT_USE_SSL, Int(requireTLS ? CURLUSESSL_ALL.rawValue : CURLUSESSL_TRY.rawValue))
        let upload = Upload(message.wire)
        let box = Unmanaged.passRetained(upload)
        defer { box.release() }
        try easy.set(CURLOPT_READDATA, pointer: box.toOpaque())
        try easy.set(CURLOPT_READFUNCTION, callback: { buffer, size, count, userdata in
            guard let buffer, let userdata else { return 0 }
            let upload = Unmanaged<Upload>.fromOpaque(userdata).takeUnretainedValue()
            return upload.read(into: buffer, capacity: size * count)
        })
        try easy.perform()
    }

    /// The message's bytes, handed to libcurl as it asks for them.
    private final class Upload {
        let data: Data
        var offset = 0
        init(_ data: Data) { self.data = data }

        func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
            let count = min(capacity, data.count - offset)
            guard count > 0 else { return 0 }
            data.withUnsafeBytes { bytes in
                UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress!.advanced(by: offset), byteCount: count)
            }
            offset += count
            return count
        }
    }
}
