#!/usr/bin/env python3
"""otlp_sink.py: an OTLP/HTTP trace receiver and a webhook endpoint, for the tracing test.

    otlp_sink.py FILE

Listens on 127.0.0.1 (a free port), prints one line `port=N` once it accepts connections, and
appends to FILE one JSON line per thing it receives:

- POST /v1/traces (OTLP/HTTP, protobuf, gzip or not): each span, decoded by the OpenTelemetry
  project's own `opentelemetry-proto` message classes, not Kiosk's code:
  {"span": NAME, "trace": HEX, "id": HEX, "parent": HEX or "", "kind": N, "service": NAME,
   "attributes": {KEY: VALUE}}; answered with an empty ExportTraceServiceResponse.
- any other POST (a notification endpoint): {"post": PATH, "traceparent": HEADER or null}; 200.

Runs until SIGTERM or SIGINT. Exit status 2 with one line when opentelemetry-proto is missing
(`make test-tools` installs it into .build/venv).
"""
import gzip, json, os, signal, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
except ImportError:
    print("otlp_sink.py: opentelemetry-proto is missing; run make test-tools (it installs it into .build/venv)", file=sys.stderr)
    sys.exit(2)

lock = threading.Lock()


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind in ("string_value", "bool_value", "int_value", "double_value") else str(any_value)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/v1/traces":
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            lines = []
            for resource_spans in request.resource_spans:
                service = next((value(a.value) for a in resource_spans.resource.attributes if a.key == "service.name"), "")
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        lines.append({"span": span.name, "trace": span.trace_id.hex(), "id": span.span_id.hex(),
                                      "parent": span.parent_span_id.hex(), "kind": span.kind, "service": service,
                                      "attributes": {a.key: value(a.value) for a in span.attributes}})
            answer = ExportTraceServiceResponse().SerializeToString()
            content_type = "application/x-protobuf"
        else:
            lines = [{"post": self.path, "traceparent": self.headers.get("traceparent")}]
            answer, content_type = b"", "text/plain"
        with lock, open(self.server.file, "a") as out:
            for line in lines:
                out.write(json.dumps(line) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.file = sys.argv[1]
    open(server.file, "a").close()
    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    print(f"port={server.server_address[1]}", flush=True)
    signal.sigwait(stops)
    server.shutdown()


if __name__ == "__main__":
    main()
