import CCurl
import Foundation

/// Runs downloads on one libcurl multi handle, `concurrency` at a time, on a thread of its own.
///
/// libcurl's multi interface does the socket work; this loop only adds transfers as slots free
/// up, collects results, and reports progress every few MiB so the caller can persist it.
public struct Downloader: Sendable {
    public var concurrency: Int
    /// How often progress is reported, in bytes.
    public var progressInterval: Int64

    public init(concurrency: Int = 3, progressInterval: Int64 = 4 << 20) {
        self.concurrency = max(1, concurrency)
        self.progressInterval = progressInterval
    }

    /// Runs every request to an outcome.
    /// - Parameter progress: called on the download thread; return false to stop that download.
    public func run(
        _ requests: [DownloadRequest],
        progress: @escaping @Sendable (DownloadProgress) -> Bool = { _ in true }
    ) async -> [String: DownloadOutcome] {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                continuation.resume(returning: self.loop(requests, progress: progress))
            }
            thread.name = "kiosk-downloads"
            thread.start()
        }
    }

    private func loop(_ requests: [DownloadRequest], progress: (DownloadProgress) -> Bool) -> [String: DownloadOutcome] {
        CurlGlobal.initializeOnce()
        var outcomes: [String: DownloadOutcome] = [:]
        guard let multi = curl_multi_init() else {
            for request in requests { outcomes[request.key] = .transport(kind: .failed, message: "libcurl could not create a multi handle") }
            return outcomes
        }
        defer { curl_multi_cleanup(multi) }

        var waiting = requests[...]
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        while !waiting.isEmpty || !active.isEmpty {
            while active.count < concurrency, let request = waiting.popFirst() {
                do {
                    let transfer = try Transfer(request)
                    curl_multi_add_handle(multi, transfer.easy.handle)
                    active[transfer.easy.handle] = transfer
                } catch let error as TransferError {
                    outcomes[request.key] = .transport(kind: error.kind, message: error.message)
                } catch {
                    outcomes[request.key] = .transport(kind: .failed, message: "\(error)")
                }
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                      let transfer = active.removeValue(forKey: handle)
                else { continue }
                let code = message.pointee.data.result
                curl_multi_remove_handle(multi, handle)
                _ = progress(transfer.progress)
                outcomes[transfer.request.key] = transfer.outcome(code)
            }
            for transfer in active.values {
                transfer.reportIfDue(interval: progressInterval, progress)
            }
            if running > 0 {
                curl_multi_poll(multi, nil, 0, 200, nil)
            }
        }
        return outcomes
    }
}
