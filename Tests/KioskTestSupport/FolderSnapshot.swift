import Foundation

/// Every regular file under a folder, by relative path, with its bytes: to compare what was
/// unpacked with what was packed.
public enum FolderSnapshot {
    public static func files(in folder: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        let base = folder.resolvingSymlinksInPath().path
        for case let url as URL in FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey]) ?? .init() {
            guard try url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true else { continue }
            files[String(url.resolvingSymlinksInPath().path.dropFirst(base.count + 1))] = try Data(contentsOf: url)
        }
        return files
    }
}
