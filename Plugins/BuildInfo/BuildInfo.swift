import Foundation
import PackagePlugin

/// Stamps the commit the program was built from (`git describe --always --dirty`) into
/// `BuildCommit.swift`, so `kiosk --version` can say it. A prebuild command, run at every build,
/// that rewrites the file only when the commit changed (so an unchanged tree recompiles nothing).
@main
struct BuildInfo: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "BuildCommit")
        let script = """
            commit=$(git -C "$1" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
            mkdir -p "$2"
            line="let buildCommit = \\"$commit\\""
            [ "$(cat "$2/BuildCommit.swift" 2>/dev/null)" = "$line" ] || printf '%s\\n' "$line" > "$2/BuildCommit.swift"
            """
        return [
            .prebuildCommand(
                displayName: "Stamping the commit into \(target.name)",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "sh", context.package.directoryURL.path, output.path],
                outputFilesDirectory: output),
        ]
    }
}
