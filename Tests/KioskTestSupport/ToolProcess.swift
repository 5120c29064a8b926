import Foundation

/// Runs a tool the tests use as a judge or a maker (python3, java -jar epubcheck, qpdf) and
/// collects what it printed, both streams together.
public enum ToolProcess {
    public static func run(_ tool: String, _ arguments: [String], in directory: URL? = nil) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        defer { Pipes.close([pipe]) }
        try process.runAlone()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitForExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
