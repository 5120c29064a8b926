import CoreMetrics
import Foundation
import KioskStore
import Prometheus

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
        CoreMetrics.Counter(
            label: "kiosk_http_requests_total",
            dimensions: [("route", route), ("method", method), ("status", String(status))],
            factory: factory
        ).increment()
    }

    static let latencyLabel = "kiosk_http_request_duration_seconds"

    /// Records how long one request took, from its head to its last byte, by route pattern and method.
    func latency(route: String, method: String, elapsed: Duration) {
        CoreMetrics.Timer(label: Self.latencyLabel, dimensions: [("route", route), ("method", method)], factory: factory)
            .recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }

    /// Counts a payment or redemption by its outcome (purchased, deferred, declined, cancelled…).
    public func payment(outcome: String) {
        CoreMetrics.Counter(label: "kiosk_payments_total", dimensions: [("outcome", outcome)], factory: factory).increment()
    }

    /// The Prometheus text exposition of every metric.
    public func exposition() -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}
