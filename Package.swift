// swift-tools-version:6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "kiosk",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "kiosk", targets: ["kiosk"]),
        .executable(name: "kiosk-server", targets: ["kiosk-server"]),
        .library(name: "KioskClient", targets: ["KioskClient"]),
        .library(name: "KioskServer", targets: ["KioskServer"]),
        .library(name: "KioskStore", targets: ["KioskStore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        // App Store signed data: its x5c chains are checked under RFC 5280 (issue 33).
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // HTTP/1 as Swift HTTP Types on the channel (NIOHTTPTypes), where the catalog's 304s are answered.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The store's rules run on SQLite (embedded default) or PostgreSQL through one SQL layer.
        .package(url: "https://github.com/vapor/sql-kit.git", from: "3.36.0"),
        .package(url: "https://github.com/vapor/sqlite-kit.git", from: "4.5.2"),
        // EventLoopGroupConnectionPool, which the database's pools are; sqlite-kit and postgres-kit use it too.
        .package(url: "https://github.com/vapor/async-kit.git", from: "1.22.0"),
        .package(url: "https://github.com/vapor/postgres-kit.git", from: "2.17.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        // Imported directly by the server (its SQLite connections, the HTTP layer under Hummingbird).
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        // How kiosk serve starts and stops its services together (already under Hummingbird).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Passwords of accounts with a sign-in are kept as bcrypt hashes (HummingbirdBcrypt).
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        // The account page's HTML: templates that escape every value unless told otherwise.
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        // Spans where a request crosses the database and the outbox (already under Hummingbird), and
        // their export over OTLP/HTTP (`kiosk serve --otlp-endpoint`); no gRPC.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // Linux calls the Glibc module does not export (sync_file_range).
        .systemLibrary(name: "CLinux"),
        // libarchive's declarations, and the functions Kiosk calls, which load it on first use
        // (LazyArchive.c): the program does not link it. Needs libarchive-dev to build.
        .target(name: "CArchive"),
        .target(
            name: "KioskCore",
            dependencies: [
                // Reached only through KioskCore's Platform (Support/Platform.swift).
                "CLinux",
                .product(name: "Crypto", package: "swift-crypto"),
                // RSA for Google Play's purchase signatures (PKCS#1 v1.5 with SHA-1).
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "KioskArchive",
            dependencies: [
                "CArchive",
                "KioskCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "KioskTransfer",
            dependencies: [
                "CCurl",
                "KioskCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The store's state and its SQL: accounts, payments, subscriptions, notifications, the App
        // Store bridge, reports, signing keys and rate limits, each an owner whose SQL stays inside.
        .target(
            name: "KioskStore",
            dependencies: [
                "KioskCore",
                // Its libcurl client POSTs notifications to the publisher's endpoints.
                "KioskTransfer",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "SQLiteKit", package: "sqlite-kit"),
                .product(name: "AsyncKit", package: "async-kit"),
                // Also brings its C module, VaporCSQLite, which InlineSQLite calls directly.
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresKit", package: "postgres-kit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "KioskServer",
            dependencies: [
                "KioskCore",
                "KioskArchive",
                "KioskStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "KioskClient",
            dependencies: [
                "KioskCore",
                "KioskTransfer",
                "KioskArchive",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // How both tools start, exit and log.
        .target(
            name: "KioskCommandLine",
            dependencies: [
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The reader's client; it hands serve, publish and keys to kiosk-server.
        .executableTarget(
            name: "kiosk",
            dependencies: [
                "KioskClient",
                "KioskCore",
                "KioskArchive",
                "KioskTransfer",
                "KioskCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // The order file is the linker's, not a resource.
            exclude: ["startup-order.txt"],
            swiftSettings: swiftSettings,
            // Fewer pages touched at every start of the reader's tool (a fetch of 1 GiB peaked at
            // 34.6 MiB without the first two, 31 with): relative relocations packed (DT_RELR, glibc
            // 2.36+), so the loader no longer reads 2.3 MiB of them; no symbol table exported (the
            // static Swift runtime asks for -export-dynamic), so libraries' symbol lookups stop
            // walking 21,000 of the program's own symbols; and lld lays the functions a fetch runs
            // (startup-order.txt, written by scripts/startup_order.py) out together at the front of
            // the code, where GNU ld scattered them over 24 MiB, every one mapping the page-cache
            // folio around it: resident code during a fetch 9.9 MiB → 5.6–6.6 MiB, and with the
            // version lines built only for --version, peak 31.9–32.9 MiB → 27.0–28.7 MiB
            // (docs/benchmarks.md, "Where the time goes", 2026-11-27 18:15).
            linkerSettings: [
                .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic",
                              "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/kiosk/startup-order.txt",
                              "-Xlinker", "--no-warn-symbol-ordering"],
                             .when(platforms: [.linux], configuration: .release)),
            ],
            plugins: ["BuildInfo"]
        ),
        // An app embedding the client engine through its public API alone (docs: KioskClient.docc).
        .executableTarget(
            name: "embedded-reader",
            dependencies: ["KioskClient"],
            path: "Examples/EmbeddedReader",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "kiosk-server",
            dependencies: [
                "KioskServer",
                "KioskStore",
                "KioskCore",
                "KioskArchive",
                "KioskCommandLine",
                // The SMTP server's settings (``SMTPServer``) are read from serve's flags.
                "KioskTransfer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["BuildInfo"]
        ),
        // Stamps the commit into kiosk and kiosk-server at every build, for `--version`.
        .plugin(name: "BuildInfo", capability: .buildTool()),
        .target(
            name: "KioskTestSupport",
            dependencies: [
                "KioskCore", "KioskServer", "KioskStore", "KioskTransfer",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Tests/KioskTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KioskCoreTests",
            dependencies: [
                "KioskCore", "KioskTestSupport", .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings),
        .testTarget(name: "KioskArchiveTests", dependencies: ["KioskArchive", "KioskCore", "CArchive", "KioskTestSupport"], swiftSettings: swiftSettings),
        .testTarget(name: "KioskTransferTests", dependencies: ["KioskTransfer", "KioskCore", "KioskTestSupport", .product(name: "Crypto", package: "swift-crypto")], swiftSettings: swiftSettings),
        .testTarget(
            name: "KioskServerTests",
            dependencies: [
                "KioskServer", "KioskStore", "KioskCore", "KioskTransfer", "KioskTestSupport",
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"), .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "SQLKit", package: "sql-kit"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "KioskClientTests",
            dependencies: [
                "KioskClient", "KioskServer", "KioskStore", "KioskArchive", "KioskCore", "KioskTransfer", "CArchive", "KioskTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "JWTKit", package: "jwt-kit"), .product(name: "Logging", package: "swift-log"), .product(name: "SQLKit", package: "sql-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ], swiftSettings: swiftSettings),
        .testTarget(name: "KioskCLITests", dependencies: ["KioskCore", "KioskCommandLine", "KioskTestSupport", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Hummingbird", package: "hummingbird")], swiftSettings: swiftSettings),
    ]
)
