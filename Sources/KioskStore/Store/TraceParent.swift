import Instrumentation
import ServiceContextModule

/// A trace's place carried across the outbox (issue 66): the W3C `traceparent` of the span a
/// change was made in, kept on the notification it announced, so the delivery that posts it later
/// (another task, another instance, after a restart) is a span of the same trace, and the
/// publisher's endpoint receives the header to continue it.
///
/// Written and read through whatever instrument the process bootstrapped (swift-otel's W3C
/// propagator in `kiosk serve --otlp-endpoint`); with none, nothing is kept.
public enum TraceParent {
    public static let header = "traceparent"

    /// The current task's `traceparent`, or nil when no span is recording.
    public static func current() -> String? {
        guard let context = ServiceContext.current else { return nil }
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: DictionaryCarrier())
        return carrier[header]
    }

    /// A context whose parent is the span `traceParent` names (a top-level one without it).
    public static func context(_ traceParent: String?) -> ServiceContext {
        var context = ServiceContext.topLevel
        if let traceParent {
            InstrumentationSystem.instrument.extract([header: traceParent], into: &context, using: DictionaryCarrier())
        }
        return context
    }

    /// The headers that carry `context` on an outgoing request.
    public static func headers(for context: ServiceContext) -> [(String, String)] {
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: DictionaryCarrier())
        return carrier.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private struct DictionaryCarrier: Injector, Extractor {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }
}
