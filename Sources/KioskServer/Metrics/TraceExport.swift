import Logging
import OTel
import ServiceLifecycle
import Tracing

/// Where `kiosk serve --otlp-endpoint` sends its traces: spans of each request (Hummingbird's
/// `TracingMiddleware`), of each use of the database within it (`ServerDatabase`), and of each
/// notification's delivery, in the trace of the request that announced it (`TraceParent` carries
/// it across the outbox). swift-otel exports them over OTLP/HTTP in protobuf, in batches, from a
/// service of the server's group that flushes what is left when the server stops.
public struct TraceExport: Sendable {
    /// The collector's OTLP/HTTP base address (`http://HOST:4318`): spans go to its `/v1/traces`.
    public var endpoint: String
    /// The `service.name` resource attribute the spans carry.
    public var serviceName = "kiosk"

    public init(endpoint: String) {
        self.endpoint = endpoint
    }

    /// The collector's traces address for `endpoint`, as the OTLP specification derives it from a
    /// base URL; nil (with why) for an address that is not http(s) or names no host.
    public static func tracesURL(_ endpoint: String) -> Result<String, TraceExportError> {
        guard let scheme = endpoint.split(separator: ":", maxSplits: 1).first?.lowercased(), ["http", "https"].contains(scheme),
              endpoint.dropFirst(scheme.count).hasPrefix("://"), endpoint.count > scheme.count + 3 else {
            return .failure(TraceExportError(message: "--otlp-endpoint must be the collector's http:// or https:// address (its OTLP/HTTP port, 4318 by default), not \(endpoint)"))
        }
        return .success(endpoint.hasSuffix("/") ? endpoint + "v1/traces" : endpoint + "/v1/traces")
    }

    /// Makes the process's tracer swift-otel's (once per process: `InstrumentationSystem` is
    /// global) and returns the service that exports its spans, to run first in the server's group
    /// so that it stops last.
    public func bootstrap(logger: Logger) throws -> any Service {
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        configuration.traces.sampler = .alwaysOn
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = try Self.tracesURL(endpoint).get()
        configuration.propagators = [.traceContext]
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(tracer)
        return service
    }
}

/// An `--otlp-endpoint` that is no collector's address.
public struct TraceExportError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
