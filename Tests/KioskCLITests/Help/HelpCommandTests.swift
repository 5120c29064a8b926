import Foundation
import KioskTestSupport
import Testing

@Suite("kiosk help, the README's command table and shell completions")
struct HelpCommandTests {
    /// The subcommands `kiosk --help` lists, by name.
    static func listedSubcommands() async throws -> [String] {
        let help = try await KioskCommand.run(["--help"])
        #expect(help.status == 0)
        let lines = help.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "SUBCOMMANDS:") else { return [] }
        return lines[(start + 1)...].prefix { !$0.isEmpty }.compactMap { line in
            // A wrapped abstract continues further in; a subcommand's name starts at the third column.
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first else { return nil }
            return String(name)
        }
    }

    @Test("every subcommand kiosk --help lists is in the README's command table, and kiosk help COMMAND is its --help")
    func readmeListsEverySubcommand() async throws {
        let names = try await Self.listedSubcommands()
        #expect(names.count >= 18 && names.contains("open") && names.contains("admin"), "\(names)")
        let readme = try String(contentsOf: SampleStore.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `kiosk ") }
        for name in names {
            #expect(rows.contains { $0.contains("`kiosk \(name)") || $0.contains(", `kiosk \(name)") }, "README.md's command table lacks kiosk \(name)")
        }
        for name in ["open", "library", "admin"] {
            let help = try await KioskCommand.run(["help", name])
            let direct = try await KioskCommand.run([name, "--help"])
            #expect(help.status == 0 && help.stdout == direct.stdout && help.stdout.contains("USAGE: kiosk \(name)"), "\(help.stdout)")
        }
    }

    @Test("make install-completions writes bash, zsh and fish completions; bash completes a subcommand from the script")
    func completionsInstallAndComplete() async throws {
        let directory = try TemporaryDirectory()
        let bash = directory.path("bash").path, zsh = directory.path("zsh").path, fish = directory.path("fish").path
        let make = try await Self.run("/usr/bin/make", [
            "--no-print-directory", "-C", SampleStore.repository.path, "install-completions",
            "KIOSK=\(KioskCommand.executable.path)", "BASH_COMPLETIONS=\(bash)", "ZSH_COMPLETIONS=\(zsh)", "FISH_COMPLETIONS=\(fish)",
        ])
        #expect(make.status == 0, "\(make.stderr)")
        #expect(make.stdout.split(separator: "\n").map(String.init) == [
            "installed \(bash)/kiosk (bash: loaded by bash-completion on the next shell)",
            "installed \(zsh)/_kiosk (zsh: add fpath=(\(zsh) $fpath); autoload -U compinit; compinit to ~/.zshrc)",
            "installed \(fish)/kiosk.fish (fish: loaded on the next shell)",
        ])
        for (file, generated) in [("\(bash)/kiosk", "bash"), ("\(zsh)/_kiosk", "zsh"), ("\(fish)/kiosk.fish", "fish")] {
            let expected = try await KioskCommand.run(["--generate-completion-script", generated])
            #expect(expected.status == 0)
            #expect(try String(contentsOfFile: file, encoding: .utf8) == expected.stdout, "\(file)")
        }
        // What a person sees after `kiosk li<Tab>`: the two subcommands that start so.
        let completed = try await Self.run("/bin/bash", ["-c", """
            shopt -s extglob
            source "$1"
            function=$(complete -p kiosk | sed 's/.* -F \\([^ ]*\\) kiosk$/\\1/')
            COMP_LINE="kiosk li"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(kiosk li); COMP_CWORD=1
            "$function" kiosk li kiosk
            printf '%s\\n' "${COMPREPLY[@]}"
            """, "completion-test", "\(bash)/kiosk"], path: KioskCommand.executable.deletingLastPathComponent().path)
        #expect(completed.stdout == "library\n", "\(completed.stderr)")
    }

    struct Ran: Sendable {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(_ program: String, _ arguments: [String], path: String? = nil) async throws -> Ran {
        try await offCooperativePool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = arguments
            var environment = ProcessInfo.processInfo.environment
            if let path { environment["PATH"] = path + ":" + (environment["PATH"] ?? "/usr/bin:/bin") }
            process.environment = environment
            let out = Pipe(), err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.runAlone()
            let output = out.fileHandleForReading.readDataToEndOfFile()
            let error = err.fileHandleForReading.readDataToEndOfFile()
            process.waitForExit()
            return Ran(status: process.terminationStatus, stdout: String(decoding: output, as: UTF8.self), stderr: String(decoding: error, as: UTF8.self))
        }
    }

    @Test("kiosk --version names the version, commit, Swift, libcurl and libarchive; a mistyped command gets a did-you-mean")
    func versionAndTypos() async throws {
        let version = try await KioskCommand.run(["--version"])
        #expect(version.status == 0)
        let lines = version.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(version.stdout)")
        #expect(lines.first?.range(of: #"^kiosk [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}(-dirty)?\)$"#, options: .regularExpression) != nil, "\(version.stdout)")
        #expect(lines.dropFirst().first?.hasPrefix("Swift 6.") == true)
        #expect(lines.dropFirst(2).first?.hasPrefix("libcurl/") == true)
        #expect(lines.dropFirst(3).first?.hasPrefix("libarchive ") == true)
        // The libraries' lines are built only for --version (libcurl's starts OpenLDAP); the help
        // still offers the flag.
        let help = try await KioskCommand.run(["--help"])
        #expect(help.status == 0 && help.stdout.contains("--version"), "\(help.stdout)")
        let spelledWithValue = try await KioskCommand.run(["--version=yes"])
        #expect(spelledWithValue.status == 0 && spelledWithValue.stdout == version.stdout, "\(spelledWithValue)")
        let server = try await KioskCommand.run(["--version"], program: KioskCommand.executable.deletingLastPathComponent().appendingPathComponent("kiosk-server"))
        let serverLines = server.stdout.split(separator: "\n").map(String.init)
        #expect(server.status == 0 && serverLines.count == 3, "\(server)")
        #expect(serverLines.first == lines.first?.replacingOccurrences(of: "kiosk ", with: "kiosk-server "), "one version and commit for the pair: \(server.stdout)")
        #expect(serverLines.dropFirst().first == lines.dropFirst().first && serverLines.last == lines.last)

        let typo = try await KioskCommand.run(["byu", "com.kiosk.books.small-engines"])
        #expect(typo.status == 2)
        #expect(typo.stderr == "kiosk: 'byu' is not a kiosk command; did you mean 'buy'? (kiosk --help lists them)\n")
        let serve = try await KioskCommand.run(["serv"])
        #expect(serve.stderr == "kiosk: 'serv' is not a kiosk command; did you mean 'serve'? (kiosk --help lists them)\n")
        let helpTypo = try await KioskCommand.run(["help", "byu"])
        #expect(helpTypo.status == 2 && helpTypo.stderr == typo.stderr, "\(helpTypo)")
        let nothing = try await KioskCommand.run(["frobnicate"])
        #expect(nothing.status == 2)
        #expect(nothing.stderr == "kiosk: 'frobnicate' is not a kiosk command; kiosk --help lists them\n")
    }
}
