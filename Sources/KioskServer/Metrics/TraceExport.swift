import Foundation
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

    /// The collector's traces address for `endpoint`: its base address with `/v1/traces` added, as
    /// the OTLP specification derives it, or the traces address itself when given. Refused (with
    /// why) when it is not http(s), names no host, or gives a port that cannot be.
    public static func tracesURL(_ endpoint: String) -> Result<String, TraceExportError> {
        let refused = TraceExportError(message: "--otlp-endpoint must be the collector's http:// or https:// address (its OTLP/HTTP port, 4318 by default), not \(endpoint)")
        guard let parts = URLComponents(string: endpoint), let scheme = parts.scheme?.lowercased(), ["http", "https"].contains(scheme),
              let host = parts.host, !host.isEmpty, parts.query == nil, parts.user == nil, parts.password == nil,
              (parts.port.map { (1...65535).contains($0) } ?? true) else { return .failure(refused) }
        var path = parts.path
        while path.hasSuffix("/") { path.removeLast() }
        if path.hasSuffix("/v1/traces") { path.removeLast("/v1/traces".count) }
        var url = parts
        url.path = path + "/v1/traces"
        guard let text = url.string else { return .failure(refused) }
        return .success(text)
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
        // What swift-otel says of itself goes to the server's log without its metadata: a context it
        // could not read comes with the request's headers, a token among them.
        var diagnostics = Logger(label: "kiosk.otel") { _ in MetadataDropping(logger.handler) }
        diagnostics.logLevel = .warning
        configuration.diagnosticLogger = .custom(diagnostics)
        configuration.diagnosticLogLevel = .warning
        // A collector that hangs or asks to be retried in an hour loses spans, never holds a stop:
        // each export gives up after 5 s, and what is left at the stop is dropped then.
        configuration.traces.otlpExporter.timeout = .seconds(5)
        configuration.traces.batchSpanProcessor.exportTimeout = .seconds(5)
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

/// A log handler that passes messages on without any metadata.
private struct MetadataDropping: LogHandler {
    var base: any LogHandler
    init(_ base: any LogHandler) { self.base = base }

    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
        base.log(level: level, message: message, metadata: nil, source: source, file: file, function: function, line: line)
    }
}
