/// A `Range` request header, read per RFC 9110 §14: one range or none.
enum ByteRange: Equatable {
    /// No usable range: serve the whole representation with 200.
    case whole
    case partial(ClosedRange<Int64>)
    /// The range starts at or past the end: 416 with `Content-Range: bytes */SIZE`.
    case unsatisfiable

    /// Reads `header` against a representation of `size` bytes. Malformed and multi-range
    /// headers are ignored, as the RFC allows.
    static func parse(_ header: String?, size: Int64) -> ByteRange {
        guard let header, header.hasPrefix("bytes=") else { return .whole }
        let spec = header.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            // A suffix: the last N bytes.
            guard let suffix = Int64(last), suffix >= 0 else { return .whole }
            guard suffix > 0, size > 0 else { return .unsatisfiable }
            return .partial(max(0, size - suffix)...(size - 1))
        }
        guard let start = Int64(first), start >= 0 else { return .whole }
        let end: Int64
        if last.isEmpty {
            end = size - 1
        } else {
            guard let value = Int64(last), value >= start else { return .whole }
            end = min(value, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .partial(start...end)
    }
}
