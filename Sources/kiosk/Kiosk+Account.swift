import ArgumentParser
import Foundation
import KioskClient
import KioskCommandLine
import KioskCore

// The account and its devices: kiosk account, login, logout and devices.

extension Kiosk {
    struct Account: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show this device's account, give it a sign-in, or link it to an anonymous one.",
            discussion: "Example: kiosk account create --email ann@example.com  (then kiosk login --email ann@example.com on another device)",
            subcommands: [Show.self, Create.self, Link.self, Export.self, Delete.self, Forgot.self, Reset.self, Mail.self],
            defaultSubcommand: Show.self
        )

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Show the account, its balance and what it owns.",
                discussion: """
                    The token is the account's password: it is shown only with --show-token. On a device \
                    with no account yet nothing is created; the first purchase creates it.

                    Example: kiosk account show --show-token
                    """
            )

            @OptionGroup var options: ClientOptions

            @Flag(help: "Also print the account token (a secret: it links any device to this account).")
            var showToken = false

            @Flag(help: "Print the account as JSON: {accountId, credits, owned, subscriptions, token?}.")
            var json = false

            func run() async throws {
                try await reportingErrors {
                    let client = try await DownloadRunner.connect(options)
                    let token = showToken ? try client.accountToken() : nil
                    guard let summary = try await client.existingAccountSummary() else {
                        if json {
                            try JSONOutput.print(JSONOutput.Account(accountId: nil, credits: 0, owned: [], subscriptions: [], token: nil))
                        } else {
                            Swift.print("no account on this device yet; the first purchase creates one (or use an existing one with kiosk account link TOKEN)")
                        }
                        return
                    }
                    if json {
                        try JSONOutput.print(JSONOutput.Account(accountId: summary.accountId, credits: summary.credits, owned: summary.owned,
                                                                subscriptions: summary.subscriptions, token: token))
                        return
                    }
                    Swift.print("account: \(summary.accountId)")
                    Swift.print("sign-in: \(try client.accountEmail() ?? "none (anonymous; kiosk account create --email EMAIL gives it one)")")
                    if let token {
                        Swift.print("token: \(token)  (link another device with `kiosk account link TOKEN`)")
                    }
                    Swift.print("credits: \(summary.credits)")
                    Swift.print("owned: \(summary.owned.isEmpty ? "nothing yet" : summary.owned.joined(separator: ", "))")
                    for subscription in summary.subscriptions {
                        let state = subscription.active ? "active until" : "expired"
                        Swift.print("subscription: \(subscription.productId) \(state) \(ISO8601DateFormatter().string(from: subscription.expiresDate))")
                    }
                    if token == nil {
                        Swift.print("token: hidden (kiosk account --show-token prints it)")
                    }
                }
            }
        }

        struct Link: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Use an anonymous account, from another device, on this one, by its token.",
                discussion: """
                    For an account with a sign-in, kiosk login --email EMAIL is the better way: this device \
                    gets a token of its own, which can be signed out alone. The account this device had is replaced. When it owns purchases, credits or \
                    subscriptions, linking is refused unless --force is given: keep its token first \
                    (kiosk account --show-token) to be able to link back.

                    Example: kiosk account link 3f9a…  (the token `kiosk account --show-token` prints on the other device)
                    """
            )

            @OptionGroup var options: ClientOptions

            @Argument(help: "The account token.")
            var token: String

            @Flag(help: "Link even though this device's current account owns purchases or credits.")
            var force = false

            func run() async throws {
                try await reportingErrors {
                    let client = try options.client()
                    // What sharing a token means for signing out is said by logout, where it applies.
                    let link = try await client.linkAccount(token: token, force: force)
                    if link.waitingPurchases > 0 { DownloadRunner.tell(await client.replay(), email: try client.accountEmail()) }
                    if link.alreadyLinked {
                        Swift.print("this device already uses account \(link.accountId); nothing changed")
                    } else if let replaced = link.replaced {
                        let held = link.replacedHoldings + link.replacedCredits > 0
                            ? "which owns \(link.replacedHoldings) purchase(s) and \(link.replacedCredits) credits"
                            : "which owned nothing"
                        Swift.print("linked to account \(link.accountId), replacing account \(replaced) on this device (\(held)); run `kiosk restore` to bring back its purchases")
                    } else {
                        Swift.print("linked to account \(link.accountId); run `kiosk restore` to bring back its purchases")
                    }
                }
            }
        }

        struct Export: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Print everything the store holds about the account as one JSON document.",
                discussion: "Example: kiosk account export > my-kiosk-account.json"
            )

            @OptionGroup var options: ClientOptions

            func run() async throws {
                try await reportingErrors {
                    try JSONOutput.print(try await options.client().exportAccount())
                }
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Erase the account's personal data at the store and sign out every device.",
                discussion: """
                    Erased: the email, the password's hash, every device and its token. Kept, as bookkeeping \
                    law asks, filed under the account's ID alone: the ledger and the transactions' IDs. \
                    Subscriptions stop renewing. An account with a sign-in asks for its password again.

                    Example: kiosk account delete --yes
                    """
            )

            @OptionGroup var options: ClientOptions
            @OptionGroup var password: PasswordOptions

            @Flag(help: "Delete without asking; nothing can be undone.")
            var yes = false

            func run() async throws {
                try await reportingErrors {
                    guard yes else {
                        throw ValidationError("deleting the account cannot be undone; run it again with --yes to delete it")
                    }
                    let client = try options.client()
                    let secret = try client.accountEmail() == nil ? nil : try password.read(confirming: false)
                    let deleted = try await client.deleteAccount(password: secret)
                    Swift.print("deleted account \(deleted.accountId): erased \(deleted.erased.joined(separator: "; ")); kept \(deleted.kept.joined(separator: "; "))")
                }
            }
        }

        struct Forgot: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Ask the store to mail a link and a code that set a new password (when it sends mail).",
                discussion: "Then: kiosk account reset --email EMAIL --code CODE. Example: kiosk account forgot --email ann@example.com")

            @OptionGroup var options: ClientOptions
            @Option(help: "The account's email.") var email: String

            func run() async throws {
                try await reportingErrors {
                    try await options.client().requestPasswordReset(email: email)
                    Swift.print("if an account signs in with \(email), a message with a reset link and code is on its way (it works for an hour); then run kiosk account reset --email \(email) --code CODE")
                }
            }
        }

        struct Mail: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Choose the store's optional mail: a message when a new issue of your subscriptions is out.",
                discussion: "Example: kiosk account mail --new-issues on")

            @OptionGroup var options: ClientOptions
            @Option(help: ArgumentHelp("on or off.", valueName: "on|off")) var newIssues: String

            func run() async throws {
                try await reportingErrors {
                    guard ["on", "off"].contains(newIssues) else { throw ValidationError("--new-issues takes on or off, not \(newIssues)") }
                    let set = try await options.client().setNewIssueMail(newIssues == "on")
                    Swift.print(set.newIssues ? "new-issue mail on: the store mails you when a new issue of your subscriptions is out" : "new-issue mail off")
                }
            }
        }

        struct Reset: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Set a new password with a one-time code (mailed by kiosk account forgot, or the operator's); every device is signed out.",
                discussion: "Example: kiosk account reset --email ann@example.com --code BCDF-GHJK-LMNP-QRST"
            )

            @OptionGroup var options: ClientOptions
            @OptionGroup var password: PasswordOptions

            @Option(help: "The account's email.") var email: String
            @Option(help: "The operator's reset code.") var code: String
            @Option(help: "This device's name in kiosk devices (default: the host's name).") var name: String?
            @Flag(help: "Go on even though this device's anonymous account owns purchases it would no longer reach.") var force = false

            func run() async throws {
                try await reportingErrors {
                    let secret = try password.read(confirming: true)
                    let link = try await options.client().resetPassword(email: email, code: code, password: secret, deviceName: name ?? DeviceName.here, force: force)
                    Swift.print("new password set for \(link.email ?? email); every other device is signed out, this one is signed in to account \(link.accountId)")
                }
            }
        }

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Give this device's account a sign-in (an email and a password), or make one with it.",
                discussion: """
                    An anonymous account keeps its purchases; with no account yet, a new one is made. Other \
                    devices then sign in with kiosk login --email EMAIL. The password is read from the \
                    terminal without echo, or from standard input with --password-stdin: at least 8 \
                    characters, any you like.

                    Example: kiosk account create --email ann@example.com
                    """
            )

            @OptionGroup var options: ClientOptions
            @OptionGroup var password: PasswordOptions

            @Option(help: "The email to sign in with.")
            var email: String

            @Option(help: "This device's name in kiosk devices (default: the host's name).")
            var name: String?

            func run() async throws {
                try await reportingErrors {
                    let secret = try password.read(confirming: true)
                    let client = try options.client()
                    let link = try await client.createAccount(email: email, password: secret, deviceName: name ?? DeviceName.here)
                    Swift.print("account \(link.accountId) signs in with \(link.email ?? email); on another device: kiosk login --email \(link.email ?? email)")
                }
            }
        }
    }


    struct Login: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign this device in to an account, with its email and password or with a code.",
            discussion: """
                The device gets a token of its own, which kiosk devices lists and can remove alone; then \
                kiosk restore brings back the account's purchases. With --code, the device shows a short \
                code to approve on a signed-in device (kiosk devices approve CODE), as a TV does. An \
                account may have a limited number of devices: at the limit, name one to remove with --replace.

                Example: kiosk login --email ann@example.com  (then kiosk restore)  |  kiosk login --code
                """
        )

        @OptionGroup var options: ClientOptions
        @OptionGroup var password: PasswordOptions

        @Option(help: "The account's email.")
        var email: String?

        @Flag(help: "Sign in with a code approved on a signed-in device, instead of a password.")
        var code = false

        @Option(help: "This device's name in kiosk devices (default: the host's name).")
        var name: String?

        @Option(help: ArgumentHelp("At the account's device limit: a device (ID or name) to sign out in its place.", valueName: "device"))
        var replace: String?

        @Flag(help: "Sign in even though this device's anonymous account owns purchases or credits it would no longer reach.")
        var force = false

        func validate() throws {
            guard (email != nil) != code else { throw ValidationError("give --email EMAIL, or --code to sign in with a code") }
            if code, password.passwordStdin { throw ValidationError("--password-stdin is for --email; --code needs no password") }
        }

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                let link: AccountLink
                if let email {
                    let secret = try password.read(confirming: false)
                    link = try await client.signIn(email: email, password: secret, deviceName: name ?? DeviceName.here, replacing: replace, force: force)
                } else {
                    link = try await client.signInWithCode(deviceName: name ?? DeviceName.here, force: force) { grant in
                        // Written at once, not buffered: the person reads it while this waits.
                        FileHandle.standardOutput.write(Data("to sign this device in, enter the code \(grant.userCode) on a signed-in device (kiosk devices approve \(grant.userCode)) or at \(grant.verificationUri); it expires in \(grant.expiresIn >= 120 ? "\(grant.expiresIn / 60) minutes" : "\(grant.expiresIn) seconds")\n".utf8))
                    }
                }
                var line = "signed in to account \(link.accountId)\(link.email.map { " (\($0))" } ?? "") as device \(link.deviceId ?? "-")"
                if let replaced = link.replaced {
                    line += "; this device's previous account \(replaced) is no longer used here"
                }
                Swift.print(line + "; run `kiosk restore` to bring back its purchases")
                // Purchases that waited for this device to sign in again go now, with their own keys.
                if link.waitingPurchases > 0 { DownloadRunner.tell(await client.replay(), email: link.email) }
            }
        }
    }

    struct Logout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign this device out: its token is revoked at the store and forgotten here.",
            discussion: """
                The library stays on the disk. Signing in again (kiosk login) gives the device a new token.

                Example: kiosk logout
                """
        )

        @OptionGroup var options: ClientOptions

        @Flag(help: "Sign out even though the account has no sign-in and owns purchases or credits nothing could reach again.")
        var force = false

        func run() async throws {
            try await reportingErrors {
                let client = try options.client()
                // Without a sign-in, this device's token may be shared (kiosk account link), and revoking it signs every holder out.
                let tokenOnly = try client.accountEmail() == nil
                if let account = try await client.signOut(force: force) {
                    Swift.print("signed out of account \(account); its token is revoked at the store"
                        + (tokenOnly ? ", so any other device linked with its token (kiosk account link) is signed out too" : ""))
                } else {
                    Swift.print("this device is not signed in; nothing to do")
                }
            }
        }
    }

    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the account's devices, remove one, or approve a code another device shows.",
            discussion: "Example: kiosk devices  |  kiosk devices remove \"old phone\"  |  kiosk devices approve BCDF-GHJK",
            subcommands: [List.self, Remove.self, Approve.self],
            defaultSubcommand: List.self
        )

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List the account's devices: name, ID, when signed in and last seen; this one marked.",
                discussion: "Example: kiosk devices --json"
            )

            @OptionGroup var options: ClientOptions

            @Flag(help: "Print the list as JSON: {devices: [{id, name, createdAt, lastSeenAt, current}], limit, email}.")
            var json = false

            func run() async throws {
                try await reportingErrors {
                    let list = try await options.client().devices()
                    if json {
                        try JSONOutput.print(list)
                        return
                    }
                    let format = ISO8601DateFormatter()
                    Swift.print("\(list.devices.count) of at most \(list.limit) devices\(list.email.map { " of \($0)" } ?? "")")
                    for device in list.devices {
                        Swift.print("\(device.current ? "*" : " ") \(device.name)  \(device.id)  signed in \(format.string(from: device.createdAt))  last seen \(format.string(from: device.lastSeenAt))\(device.current ? "  (this device)" : "")")
                    }
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Sign one of the account's devices out at once (its ID or name).",
                discussion: "Example: kiosk devices remove \"old phone\""
            )

            @OptionGroup var options: ClientOptions

            @Argument(help: "The device's ID or name (kiosk devices lists them).")
            var device: String

            @Flag(help: "Remove the last device of an account without a sign-in all the same: the account and what it bought are lost.")
            var force = false

            func run() async throws {
                try await reportingErrors {
                    let removed = try await options.client().removeDevice(device, force: force)
                    Swift.print("removed \(removed.name) (\(removed.id)); it is signed out\(removed.current ? ", and so is this device" : "")")
                }
            }
        }

        struct Approve: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Approve the code a device shows (kiosk login --code there), signing it in to this account.",
                discussion: "Example: kiosk devices approve BCDF-GHJK"
            )

            @OptionGroup var options: ClientOptions

            @Argument(help: "The code the other device shows.")
            var code: String

            func run() async throws {
                try await reportingErrors {
                    let approved = try await options.client().approveDeviceCode(code)
                    Swift.print("approved: \(approved.deviceName) signs in to this account at its next poll")
                }
            }
        }
    }
}

/// Where a password comes from: the terminal, without echo, or standard input.
struct PasswordOptions: ParsableArguments {
    @Flag(help: "Read the password from standard input (one line) instead of the terminal.")
    var passwordStdin = false

    /// The password; at a terminal asked twice when `confirming`.
    func read(confirming: Bool) throws -> String {
        if passwordStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw ValidationError("--password-stdin: standard input held no password; send it as one line")
            }
            return line
        }
        guard isatty(STDIN_FILENO) == 1 else {
            throw ValidationError("standard input is not a terminal to ask for the password at; send it with --password-stdin")
        }
        let password = try TerminalPassword.ask("password: ")
        if confirming, try TerminalPassword.ask("the same password again: ") != password {
            throw ValidationError("the two passwords differ; nothing was changed")
        }
        return password
    }
}

/// Reads a password from the terminal, a key at a time with echo and signals off, restored
/// afterwards whatever happens: Ctrl-C ends the command at once (the terminal's own handling would
/// have been caught by the command's interrupt handler, leaving the read waiting and echo off),
/// Backspace and Ctrl-U edit, Ctrl-D on an empty line gives up.
enum TerminalPassword {
    static func ask(_ prompt: String) throws -> String {
        FileHandle.standardError.write(Data(prompt.utf8))
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { throw ValidationError("cannot read the terminal's settings to hide the password") }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(STDIN_FILENO, &byte, 1)
            if count < 0, errno == EINTR { continue }
            guard count == 1 else { break }
            switch byte {
            case 0x0A, 0x0D:
                return String(decoding: bytes, as: UTF8.self)
            case 0x03:
                throw ValidationError("interrupted; nothing was changed")
            case 0x04 where bytes.isEmpty:
                throw ValidationError("no password was typed; nothing was changed")
            case 0x7F, 0x08:
                // One character back: the bytes of a whole UTF-8 sequence.
                while let last = bytes.popLast(), last & 0xC0 == 0x80 {}
            case 0x15:
                bytes.removeAll()
            default:
                bytes.append(byte)
            }
        }
        throw ValidationError("no password was typed; nothing was changed")
    }
}

/// The name a device gives itself by default: the host's.
enum DeviceName {
    static var here: String { ProcessInfo.processInfo.hostName }
}
