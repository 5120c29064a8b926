import CoreMetrics
import Foundation
import KioskStore
import Prometheus
import Synchronization

/// The server's metrics, kept in its own Prometheus registry and served at `/metrics`.
///
/// The metrics are swift-metrics types made with an explicit factory rather than the global
/// `MetricsSystem`, which can be bootstrapped only once per process: several servers (in tests)
/// then keep separate counts.
public struct ServerMetrics: StoreMetrics {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    let bytesServed: CoreMetrics.Counter
    let downloadsInFlight: CoreMetrics.Meter
    /// Each request's counter and timer, made once per route, method and status: making them per
    /// request (a registry lookup under its lock, and the label checked) was 3 % of a catalog 304.
    private let handles = Handles()

    private final class Handles: Sendable {
        let counters = Mutex<[RequestKey: CoreMetrics.Counter]>([:])
        let timers = Mutex<[RequestKey: CoreMetrics.Timer]>([:])
        let gauges = Mutex<[String: CoreMetrics.Meter]>([:])
    }

    private struct RequestKey: Hashable {
        let route: String
        let method: String
        let status: Int
    }

    public init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        // Requests answer in milliseconds; a download runs for seconds or minutes, and its whole
        // duration (to the last byte) is what the histogram records.
        factory.durationHistogramBuckets[Self.latencyLabel] = [
            .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
            .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(300),
        ]
        self.factory = factory
        bytesServed = CoreMetrics.Counter(label: "kiosk_content_bytes_served_total", dimensions: [], factory: factory)
        downloadsInFlight = CoreMetrics.Meter(label: "kiosk_downloads_in_flight", dimensions: [], factory: factory)
    }

    /// Counts one answered request by its route pattern (not its path, to keep labels bounded).
    func request(route: String, method: String, status: Int) {
        let key = RequestKey(route: route, method: method, status: status)
        let counter = handles.counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = CoreMetrics.Counter(
                label: "kiosk_http_requests_total",
                dimensions: [("route", route), ("method", method), ("status", String(status))],
                factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    static let latencyLabel = "kiosk_http_request_duration_seconds"

    /// Records how long one request took, from its head to its last byte, by route pattern and method.
    func latency(route: String, method: String, elapsed: Duration) {
        let key = RequestKey(route: route, method: method, status: 0)
        let timer = handles.timers.withLock { timers in
            if let timer = timers[key] { return timer }
            let timer = CoreMetrics.Timer(label: Self.latencyLabel, dimensions: [("route", route), ("method", method)], factory: factory)
            timers[key] = timer
            return timer
        }
        timer.recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }

    /// Counts a payment or redemption by its outcome (purchased, deferred, declined, cancelled…).
    public func payment(outcome: String) {
        CoreMetrics.Counter(label: "kiosk_payments_total", dimensions: [("outcome", outcome)], factory: factory).increment()
    }

    /// Sets a gauge of the store's backlog (one label, no dimensions), made on first use.
    func gauge(_ label: String, _ value: Int) {
        let meter = handles.gauges.withLock { gauges in
            if let meter = gauges[label] { return meter }
            let meter = CoreMetrics.Meter(label: label, dimensions: [], factory: factory)
            gauges[label] = meter
            return meter
        }
        meter.set(Double(value))
    }

    /// Messages waiting in the mail outbox, and those given up.
    func setMail(pending: Int, failed: Int) {
        gauge("kiosk_mail_pending", pending)
        gauge("kiosk_mail_failed", failed)
    }

    /// What waits on the store, and the reloads refused since the start.
    func setBacklog(_ backlog: Reports.Backlog, failedReloads: Int) {
        gauge("kiosk_webhook_deliveries_pending", backlog.deliveriesPending)
        gauge("kiosk_webhook_deliveries_failed", backlog.deliveriesFailed)
        gauge("kiosk_channel_events_to_act_on", backlog.eventsToActOn)
        setMail(pending: backlog.mailPending, failed: backlog.mailFailed)
        gauge("kiosk_catalog_reloads_failed", failedReloads)
    }

    /// The Prometheus text exposition of every metric.
    public func exposition() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}
