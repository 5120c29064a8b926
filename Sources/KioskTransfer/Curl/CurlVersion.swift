import CCurl

/// The libcurl this program runs with, for `kiosk --version`.
public enum CurlVersion {
    /// libcurl's own line, e.g. `libcurl/7.88.1 OpenSSL/3.0.19 zlib/1.2.13 …`.
    public static var description: String {
        guard let text = curl_version() else { return "libcurl (version unknown)" }
        return String(cString: text)
    }
}
