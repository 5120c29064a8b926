import ArgumentParser
import Foundation
import KioskClient
import KioskCore
import KioskCommandLine

extension Kiosk {
    struct Open: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print where an installed book or issue's files are; works offline.",
            discussion: """
                Prints the product's folder in this home's library, one line, so that a reader can \
                open it: `xdg-open "$(kiosk open ID)"`, `cd "$(kiosk open ID)"`. The same as \
                `kiosk library --path ID`.

                Example: kiosk open com.kiosk.books.river-of-maps
                """
        )

        @OptionGroup var options: ClientOptions

        @Argument(help: "The product ID (kiosk library lists what is installed).")
        var productId: String

        func validate() throws {
            if productId.trimmingCharacters(in: .whitespaces).isEmpty {
                throw ValidationError("give a product ID (kiosk library lists what is installed)")
            }
        }

        func run() async throws {
            try await reportingErrors {
                print(try LibraryPath.find(productId, in: try options.client()))
            }
        }
    }
}

/// Where an installed product's folder (or a publication's file) is, or one line saying why it is not there.
enum LibraryPath {
    /// The folder of `productId` in the client's home.
    /// - Throws: ``NotInstalled`` naming the product, where its download stands and what to run.
    static func find(_ productId: String, in client: KioskClient) throws -> String {
        if let entry = try client.libraryEntries().first(where: { $0.item.productId == productId }) {
            guard FileManager.default.fileExists(atPath: entry.item.path) else {
                throw NotInstalled(productId: productId, why: "its folder \(entry.item.path) is missing", action: "run kiosk resume to download it again")
            }
            // A publication delivered as a file (EPUB, PDF, CBZ) is opened as that file.
            if let name = try client.downloads().first(where: { $0.productId == productId })?.fileName, PublicationFileName.isSafe(name) {
                let file = URL(fileURLWithPath: entry.item.path).appendingPathComponent(name).path
                guard FileManager.default.fileExists(atPath: file) else {
                    throw NotInstalled(productId: productId, why: "its file \(file) is missing", action: "run kiosk resume to download it again")
                }
                return file
            }
            return entry.item.path
        }
        guard let download = try client.downloads().first(where: { $0.productId == productId }) else {
            throw NotInstalled(productId: productId, why: "nothing of it is in this library", action: "kiosk library lists what is installed; kiosk buy or kiosk restore brings it")
        }
        switch download.state {
        case .paused:
            throw NotInstalled(productId: productId, why: "its download is paused at \(download.bytesDone) of \(download.size) bytes", action: "run kiosk resume")
        case .cancelled:
            throw NotInstalled(productId: productId, why: "its download was cancelled", action: "run kiosk restore to bring it back")
        case .failed:
            throw NotInstalled(productId: productId, why: "its download failed (\(download.lastError ?? "no reason recorded"))", action: "run kiosk restore to try again")
        default:
            throw NotInstalled(productId: productId, why: "its download is \(download.state.rawValue) with \(download.bytesDone) of \(download.size) bytes", action: "run kiosk resume to finish it")
        }
    }

    struct NotInstalled: Error, CustomStringConvertible {
        var productId: String
        var why: String
        var action: String
        var description: String { "\(productId) is not installed: \(why); \(action)" }
    }
}
