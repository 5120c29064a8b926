import Foundation
import KioskServer
import KioskTestSupport
import KioskTransfer
import Testing

/// The reference deployment in deploy/: what it exposes to readers.
@Suite("The reference deployment (deploy/)")
struct DeploymentTests {
    static var unit: URL { TestNginx.deployConfig.deletingLastPathComponent().appendingPathComponent("kiosk@.service") }

    /// The arguments of the unit's ExecStart, each flag with its value.
    static func execStartFlags() throws -> [String: String] {
        let text = try String(contentsOf: unit, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        let words = line.dropFirst("ExecStart=".count).split(separator: " ").map(String.init)
        var flags: [String: String] = [:]
        for (index, word) in words.enumerated() where word.hasPrefix("--") && index + 1 < words.count {
            flags[word] = words[index + 1]
        }
        return flags
    }

    @Test("kiosk@.service serves /metrics on a loopback admin port of its own, not on the instance's public port")
    func unitPutsMetricsOnAdminAddress() throws {
        let flags = try Self.execStartFlags()
        #expect(flags["--host"] == "127.0.0.1")
        #expect(flags["--metrics-host"] == "127.0.0.1")
        let metricsPort = try #require(flags["--metrics-port"])
        // systemd puts the instance's port where %i is: the admin port must differ from it and be a port.
        for instance in ["1024", "8081", "9999"] {
            let port = try #require(Int(metricsPort.replacingOccurrences(of: "%i", with: instance)))
            #expect(port != Int(instance) && (1...65535).contains(port), "kiosk@\(instance): metrics on \(port)")
        }
    }

    @Test("kiosk@.service believes X-Forwarded-For from the nginx on its own machine only, for the rate limits")
    func unitTrustsLocalProxy() throws {
        #expect(try Self.execStartFlags()["--trusted-proxy"] == "127.0.0.1")
    }

    @Test("through deploy/nginx.conf a request for /metrics answers 404 however it is spelled, even from an instance that serves it publicly")
    func nginxDoesNotProxyMetrics() async throws {
        let directory = try TemporaryDirectory()
        let store = try SampleStore(in: directory)
        // Worst case: an instance started without --metrics-port serves /metrics on its main address.
        let configuration = ServerConfiguration(catalogDirectory: store.catalog, contentDirectory: store.content, dataDirectory: store.data)
        try await LiveServer.run(configuration) { _, url in
            #expect(try await HTTPClient().send(HTTPRequest(url: url + "/metrics")).status == 200)
            let upstream = url.replacingOccurrences(of: "http://", with: "")
            try await TestNginx.with(upstreams: [upstream], published: directory.path("published"), secret: "unused") { nginx in
                #expect(try await HTTPClient().send(HTTPRequest(url: nginx.baseURL + "/healthz")).status == 200, "nginx does not reach the instance")
                for path in ["/metrics", "/metrics/", "/metrics?format=text", "//metrics", "/%6Detrics"] {
                    let response = try await HTTPClient().send(HTTPRequest(url: nginx.baseURL + path))
                    #expect(response.status == 404, "\(path): \(response.status)")
                    #expect(!String(decoding: response.body, as: UTF8.self).contains("# TYPE"), "\(path) leaked the metrics")
                }
            }
        }
    }
}
