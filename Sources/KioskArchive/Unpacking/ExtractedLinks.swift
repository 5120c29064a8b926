/// The symbolic links an extraction has written so far, so that a new link or entry is judged by
/// where it really leads, not by how its text reads.
///
/// `x/y/up -> ..` followed by `t -> x/y/up/../..` reads as inside but resolves to the parent of
/// the destination: resolving each component through the links already written catches it.
struct ExtractedLinks {
    /// Relative path (components joined by `/`) → the link's target text.
    private var targets: [String: String] = [:]

    /// Links within links are followed this deep, as the kernel's ELOOP limit does.
    private static let maxFollows = 40

    mutating func add(_ path: [String], target: String) {
        targets[path.joined(separator: "/")] = target
    }

    func contains(_ path: [String]) -> Bool {
        targets[path.joined(separator: "/")] != nil
    }

    /// The first proper prefix of `path` that is a link, if any: writing `path` would go through it.
    func linkOnPath(to path: [String]) -> String? {
        guard path.count > 1 else { return nil }
        for end in 1..<path.count {
            let prefix = path[..<end].joined(separator: "/")
            if targets[prefix] != nil { return prefix }
        }
        return nil
    }

    /// True when a link at `path` pointing to `target` resolves, through the links already
    /// written, to a place inside the destination.
    func resolvesInside(linkAt path: [String], target: String) -> Bool {
        guard !target.isEmpty, !target.hasPrefix("/"), !target.contains("\\"), !target.contains("\0") else { return false }
        var follows = 0
        guard let resolved = resolve(Array(path.dropLast()), then: target.split(separator: "/").map(String.init), follows: &follows) else {
            return false
        }
        return !resolved.isEmpty
    }

    /// Walks `components` from `base`, substituting every link met; nil when the walk leaves the
    /// destination or follows too many links.
    private func resolve(_ base: [String], then components: [String], follows: inout Int) -> [String]? {
        var resolved = base
        for component in components {
            switch component {
            case "", ".":
                continue
            case "..":
                guard !resolved.isEmpty else { return nil }
                resolved.removeLast()
            default:
                resolved.append(component)
                if let target = targets[resolved.joined(separator: "/")] {
                    follows += 1
                    guard follows <= Self.maxFollows, !target.hasPrefix("/") else { return nil }
                    guard let next = resolve(Array(resolved.dropLast()), then: target.split(separator: "/").map(String.init), follows: &follows) else {
                        return nil
                    }
                    resolved = next
                }
            }
        }
        return resolved
    }
}
