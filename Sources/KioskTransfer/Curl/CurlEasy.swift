import CCurl
import Foundation

/// Owns one libcurl easy handle and cleans it up when released.
///
/// Result codes turn into ``TransferError`` in one place; curl's own detailed message (the
/// error buffer) is kept so an error can say more than the generic text of its code.
final class CurlEasy {
    let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var recipientList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private(set) var url: String

    init(url: String) throws {
        CurlGlobal.initializeOnce()
        guard let handle = curl_easy_init() else {
            throw TransferError(url: url, kind: .failed, message: "libcurl could not create a handle")
        }
        self.handle = handle
        self.url = url
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        try setDefaults()
    }

    /// Makes the handle as new for a request to `url`, keeping what `curl_easy_reset` keeps: its
    /// open connections (and DNS and TLS session caches), which is why a handle is worth reusing.
    func reuse(for url: String) throws {
        curl_easy_reset(handle)
        curl_slist_free_all(headerList)
        headerList = nil
        errorBuffer.update(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        self.url = url
        try setDefaults()
    }

    /// Forgets the last request's callbacks and their data, which do not outlive it, while idle.
    func clear() {
        curl_easy_reset(handle)
        curl_slist_free_all(headerList)
        headerList = nil
    }

    private func setDefaults() throws {
        try set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
        try set(CURLOPT_URL, url)
        try set(CURLOPT_NOSIGNAL, 1)
        try set(CURLOPT_USERAGENT, "kiosk/1")
        // Never ftp://, file:// or the other schemes libcurl knows, not even through a redirect.
        try set(CURLOPT_PROTOCOLS_STR, "http,https")
        try set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headerList)
        curl_slist_free_all(recipientList)
        errorBuffer.deallocate()
    }

    func set(_ option: CURLoption, _ value: Int) throws {
        try check(kiosk_curl_easy_setopt_long(handle, option, value))
    }

    func set(_ option: CURLoption, offset value: Int64) throws {
        try check(kiosk_curl_easy_setopt_off_t(handle, option, curl_off_t(value)))
    }

    /// libcurl copies string options, so the Swift string need not outlive the call.
    func set(_ option: CURLoption, _ value: String) throws {
        try check(kiosk_curl_easy_setopt_string(handle, option, value))
    }

    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) throws {
        try check(kiosk_curl_easy_setopt_pointer(handle, option, value))
    }

    func set(_ option: CURLoption, callback: kiosk_curl_data_callback) throws {
        try check(kiosk_curl_easy_setopt_data_callback(handle, option, callback))
    }

    func set(_ option: CURLoption, progress: kiosk_curl_xferinfo_callback) throws {
        try check(kiosk_curl_easy_setopt_xferinfo_callback(handle, option, progress))
    }

    /// Replaces the request headers; the list lives as long as the handle.
    func setHeaders(_ headers: [(name: String, value: String)]) throws {
        curl_slist_free_all(headerList)
        headerList = nil
        for header in headers {
            headerList = curl_slist_append(headerList, "\(header.name): \(header.value)")
        }
        try check(kiosk_curl_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList))
    }

    /// The recipients of an SMTP message (`CURLOPT_MAIL_RCPT`); the list lives as long as the handle.
    func setRecipients(_ recipients: [String]) throws {
        curl_slist_free_all(recipientList)
        recipientList = nil
        for recipient in recipients { recipientList = curl_slist_append(recipientList, "<\(recipient)>") }
        try check(kiosk_curl_easy_setopt_slist(handle, CURLOPT_MAIL_RCPT, recipientList))
    }

    func info(_ info: CURLINFO) -> Int {
        var value = 0
        _ = kiosk_curl_easy_getinfo_long(handle, info, &value)
        return value
    }

    /// A string the handle reports (such as the effective URL), or nil.
    func info(string info: CURLINFO) -> String? {
        var pointer: UnsafeMutableRawPointer?
        guard kiosk_curl_easy_getinfo_pointer(handle, info, &pointer) == CURLE_OK, let pointer else { return nil }
        return String(cString: pointer.assumingMemoryBound(to: CChar.self))
    }

    func info(offset info: CURLINFO) -> Int64 {
        var value: curl_off_t = 0
        _ = kiosk_curl_easy_getinfo_off_t(handle, info, &value)
        return Int64(value)
    }

    /// Runs the transfer to the end on the calling thread.
    func perform() throws {
        try check(curl_easy_perform(handle))
    }

    /// Turns a result code into a ``TransferError`` naming the URL.
    func check(_ code: CURLcode) throws {
        guard code != CURLE_OK else { return }
        throw error(for: code)
    }

    func error(for code: CURLcode) -> TransferError {
        let detail = String(cString: errorBuffer)
        let message = Self.plainWords(code) ?? (detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail)
        return TransferError(url: url, kind: TransferError.Kind(code), message: message)
    }

    /// What the codes a person meets mean, in words: OpenSSL's and libcurl's own texts
    /// (`error:0A00010B:SSL routines::wrong version number`) say nothing to a reader.
    static func plainWords(_ code: CURLcode) -> String? {
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL:
            return "only http:// and https:// URLs are supported"
        case CURLE_URL_MALFORMAT:
            return "the URL is malformed"
        case CURLE_COULDNT_RESOLVE_HOST:
            return "the host name is unknown (check its spelling and the network)"
        case CURLE_COULDNT_CONNECT:
            return "nothing answers at that address and port (connection refused or unreachable)"
        case CURLE_WEIRD_SERVER_REPLY:
            return "what answered does not speak HTTP"
        case CURLE_OPERATION_TIMEDOUT:
            return "the connection timed out or stalled"
        case CURLE_SSL_CONNECT_ERROR:
            return "the TLS (https) handshake failed; if the server speaks plain HTTP, use http://"
        case CURLE_PEER_FAILED_VERIFICATION:
            return "the server's TLS certificate is not trusted (self-signed, expired, or for another name)"
        case CURLE_SSL_CACERT_BADFILE:
            return "the system's trusted certificates could not be read"
        case CURLE_GOT_NOTHING:
            return "the server closed the connection without answering"
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR:
            return "the connection was reset"
        case CURLE_TOO_MANY_REDIRECTS:
            return "too many redirects"
        default:
            return nil
        }
    }
}

/// `curl_global_init` must run once, before any other libcurl call, and is not thread-safe.
enum CurlGlobal {
    private static let initialized: Bool = {
        curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
    }()

    static func initializeOnce() {
        _ = initialized
    }
}
