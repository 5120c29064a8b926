import CCurl
import Foundation
import Synchronization

/// Runs downloads on one libcurl multi handle, `concurrency` at a time, on a thread of its own.
///
/// libcurl's multi interface does the socket work; this loop only adds transfers as slots free
/// up, collects results, and sends each transfer's progress about twice a second into a stream
/// the caller reads (to persist it, say) while the transfers go on: the transfer thread never
/// waits for the caller. A stop (the caller names the download in ``DownloadStops``, or the
/// calling Task is cancelled) removes the transfer from the multi handle at once, even when no
/// byte is arriving: it ends within one poll interval, with the bytes already received kept in
/// the partial file.
public struct Downloader: Sendable {
    public var concurrency: Int
    /// How often progress is reported.
    public var progressPeriod: Duration
    /// How long one wait for socket activity lasts; bounds how late a stop is noticed.
    public var pollInterval: Duration = .milliseconds(100)

    public init(concurrency: Int = 3, progressPeriod: Duration = .milliseconds(500)) {
        self.concurrency = max(1, concurrency)
        self.progressPeriod = progressPeriod
    }

    /// Runs every request to an outcome. Cancelling the calling Task stops every transfer
    /// (outcome ``DownloadOutcome/stopped``) within one poll interval.
    /// - Parameter stops: downloads to stop (outcome ``DownloadOutcome/stopped``), named while they run.
    /// - Parameter progress: where progress goes, as it happens and once more where each transfer
    ///   ended; finished when every transfer has ended.
    public func run(
        _ requests: [DownloadRequest], stops: DownloadStops = DownloadStops(),
        progress: AsyncStream<DownloadProgress>.Continuation? = nil
    ) async -> [String: DownloadOutcome] {
        let cancelled = Atomic<Bool>(false)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let thread = Thread {
                    let outcomes = self.loop(requests, cancelled: cancelled, stops: stops) { progress?.yield($0) }
                    progress?.finish()
                    continuation.resume(returning: outcomes)
                }
                thread.name = "kiosk-downloads"
                thread.start()
            }
        } onCancel: {
            cancelled.store(true, ordering: .relaxed)
        }
    }

    private func loop(_ requests: [DownloadRequest], cancelled: borrowing Atomic<Bool>, stops: DownloadStops, progress: (DownloadProgress) -> Void) -> [String: DownloadOutcome] {
        CurlGlobal.initializeOnce()
        var outcomes: [String: DownloadOutcome] = [:]
        guard let multi = curl_multi_init() else {
            for request in requests { outcomes[request.key] = .transport(kind: .failed, message: "libcurl could not create a multi handle") }
            return outcomes
        }
        defer { curl_multi_cleanup(multi) }
        let pollMilliseconds = Int32(pollInterval.components.seconds * 1000 + pollInterval.components.attoseconds / 1_000_000_000_000_000)
        let period = Double(progressPeriod.components.seconds) + Double(progressPeriod.components.attoseconds) / 1e18

        var waiting = requests[...]
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        while !waiting.isEmpty || !active.isEmpty {
            if cancelled.load(ordering: .relaxed) {
                for (handle, transfer) in active {
                    curl_multi_remove_handle(multi, handle)
                    outcomes[transfer.request.key] = transfer.stop()
                    // Where it stopped, so what is recorded matches the partial file.
                    progress(transfer.progress)
                }
                for request in waiting { outcomes[request.key] = .stopped }
                return outcomes
            }
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
                let outcome = transfer.outcome(code)
                progress(transfer.progress)
                outcomes[transfer.request.key] = outcome
            }
            for (handle, transfer) in active {
                if let due = transfer.progressIfDue(period: period) { progress(due) }
                if stops.contains(transfer.request.key) {
                    curl_multi_remove_handle(multi, handle)
                    active.removeValue(forKey: handle)
                    outcomes[transfer.request.key] = transfer.stop()
                    progress(transfer.progress)
                }
            }
            if running > 0 {
                curl_multi_poll(multi, nil, 0, pollMilliseconds, nil)
            }
        }
        return outcomes
    }
}

/// The downloads a caller wants stopped, named by key while ``Downloader/run(_:stops:progress:)``
/// runs them; the download thread looks here every poll interval.
public final class DownloadStops: Sendable {
    private let keys = Mutex<Set<String>>([])

    public init() {}

    public func stop(_ key: String) {
        _ = keys.withLock { $0.insert(key) }
    }

    func contains(_ key: String) -> Bool {
        keys.withLock { $0.contains(key) }
    }
}
