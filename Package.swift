// swift-tools-version:6.2
import PackageDescription

// One set of settings for every target, as Hummingbird does.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .treatAllWarnings(as: .error),
]

let package = Package(
    name: "ProfileEscrow",
    // Linux only: the libsodium shim and the group commit's thread use Glibc. (No `platforms` entry can
    // say "Linux only"; none is declared, so nothing claims a macOS build.)
    products: [
        .library(name: "ProfileEscrow", targets: ["ProfileEscrow"]),
        .library(name: "EscrowCrypto", targets: ["EscrowCrypto"]),
        .library(name: "EscrowCustody", targets: ["EscrowCustody"]),
        .library(name: "EscrowCore", targets: ["EscrowCore"]),
        .library(name: "EscrowSQLite", targets: ["EscrowSQLite"]),
        .library(name: "EscrowPostgres", targets: ["EscrowPostgres"]),
        .library(name: "EscrowHTTP", targets: ["EscrowHTTP"]),
        // For anyone writing a store: the checks every `EscrowStore` must pass, run against a fresh store of theirs.
        .library(name: "EscrowStoreConformance", targets: ["EscrowStoreConformance"]),
        // For iOS and macOS apps: native Sign in with Apple captured at the source, the credential kept until it is.
        .library(name: "ProfileEscrowClient", targets: ["ProfileEscrowClient"]),
        .executable(name: "profile-escrow", targets: ["profile-escrow"]),
        // For the tests of code built on the library, as HummingbirdTesting is: a fixture, a fake backend, and the
        // one way to wait (eventually, bounded).
        .library(name: "EscrowTestSupport", targets: ["EscrowTestSupport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // Already resolved through postgres-nio: TLS behind `sslmode`, on serve's listeners, and toward the backend.
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.25.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // Already resolved through async-http-client: its HTTP server for tests, its pthread-backed locks
        // (which ThreadSanitizer understands, unlike Synchronization.Mutex's futex on Linux).
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        // The console's, sign-in's and purge report's pages: templates with Mustache's escaping.
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        // Already resolved through Hummingbird: the HTTP part types its channel handlers see.
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.34.1"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Spans: the instrumentation API (already resolved through Hummingbird, whose TracingMiddleware uses it).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        // The OTLP exporter of `serve` and `replay`, over HTTP only: its gRPC exporter would build gRPC too (minutes).
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
        // Tests only, already in the graph through Hummingbird: the HTTP field types its test client takes.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        // Already in the graph through jwt-kit: BoringSSL's X25519 for sealing (EscrowCrypto's `SealedBox`); in tests, a
        // fresh RSA key for the Apple tokens the tests sign.
        .package(url: "https://github.com/apple/swift-crypto", "4.1.0"..<"5.0.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // The PKCS#11 interface (p11-kit's header) for key custody; the module itself is loaded at run time (dlopen).
        .systemLibrary(
            name: "CPKCS11",
            pkgConfig: "p11-kit-1",
            providers: [.apt(["libp11-kit-dev"])]
        ),
        // sqlite3_db_config is variadic and cannot be called from Swift: one C function that sets a connection's
        // "no checkpoint on close" flag (see docs/architecture.md, "Many processes on one SQLite store").
        .target(
            name: "CSQLiteShim",
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        // BoringSSL's X25519 (linked through swift-crypto's `Crypto`) called with secrets in libsodium's guarded memory,
        // and the scalar that turns a shared secret of two held secrets into a base-point multiplication.
        .target(
            name: "CX25519",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            linkerSettings: [.linkedLibrary("sodium")]
        ),
        .target(
            name: "EscrowCrypto",
            dependencies: [
                "CSodium",
                "CX25519",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "EscrowCore",
            dependencies: [
                "EscrowCrypto",
                // The group commit's lock: pthread-backed, which ThreadSanitizer understands.
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Key custody engines (OpenBao/Vault Transit over HTTP, PKCS#11 tokens): EscrowCrypto stays free of both.
        .target(
            name: "EscrowCustody",
            dependencies: [
                "CPKCS11",
                "EscrowCrypto",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // Apple's `.p8` key: read (P-256, PKCS#8) and, kept in a file, signing client secrets.
                .product(name: "Crypto", package: "swift-crypto"),
                // Transit's BYOK import of Apple's key: RSA-OAEP and single AES blocks (for AES key wrap with padding).
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "EscrowSQLite",
            dependencies: [
                "CSQLiteShim",
                "EscrowCore",
                "EscrowCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "EscrowPostgres",
            dependencies: [
                "EscrowCore",
                "EscrowCrypto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "ProfileEscrow",
            dependencies: [
                "EscrowCore",
                "EscrowCrypto",
                "EscrowCustody",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "EscrowStoreConformance",
            dependencies: ["EscrowCore", "EscrowCrypto"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "EscrowHTTP",
            dependencies: [
                "EscrowCore",
                "EscrowCrypto",
                "ProfileEscrow",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            // The pages' templates, stylesheet and script: a folder copied whole into the module's resource bundle,
            // found beside the executable (see `PageTemplates`).
            resources: [.copy("Pages")],
            swiftSettings: swiftSettings
        ),
        // The app's side of native sign-in: Foundation only (and, where they exist, Security and
        // AuthenticationServices), so that an app links none of the server.
        .target(
            name: "ProfileEscrowClient",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "profile-escrow",
            dependencies: [
                "EscrowCore",
                "EscrowCrypto",
                "EscrowCustody",
                "EscrowHTTP",
                "EscrowPostgres",
                "EscrowSQLite",
                "ProfileEscrow",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "EscrowTestSupport",
            dependencies: [
                "EscrowCore",
                "EscrowCrypto",
                "EscrowSQLite",
                "ProfileEscrow",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // The stand-in Apple checks client secrets (ES256) and signs its id_tokens.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            path: "Tests/EscrowTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EscrowCryptoTests",
            dependencies: ["EscrowCrypto"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EscrowCustodyTests",
            dependencies: [
                "EscrowTestSupport",
                "EscrowCustody",
                // The Apple token exchanger, its client secrets signed in a PKCS#11 token.
                "EscrowHTTP",
                "EscrowCrypto",
                "EscrowCore",
                "EscrowSQLite",
                "ProfileEscrow",
                // Built before these tests: they run the real binary against real engines.
                "profile-escrow",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EscrowCoreTests",
            dependencies: ["EscrowCore", "EscrowCrypto", "EscrowTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EscrowSQLiteTests",
            dependencies: [
                "EscrowTestSupport",
                "EscrowSQLite",
                "EscrowStoreConformance",
                "EscrowCore",
                "EscrowCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EscrowPostgresTests",
            dependencies: [
                "EscrowTestSupport",
                "EscrowPostgres",
                "EscrowStoreConformance",
                "EscrowCore",
                "EscrowCrypto",
                "ProfileEscrow",
                // Built before these tests: the fault tests kill a real `serve` node and a real `replay` worker.
                "profile-escrow",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProfileEscrowTests",
            dependencies: [
                "EscrowTestSupport",
                "ProfileEscrow",
                // The purge report's HTML document is rendered by EscrowHTTP's templates.
                "EscrowHTTP",
                "EscrowSQLite",
                "EscrowCore",
                "EscrowCrypto",
                "profile-escrow",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // NIO's own harness for one channel handler, driven step by step (the delivery's exchange handler).
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "EscrowHTTPTests",
            dependencies: [
                "EscrowTestSupport",
                "EscrowHTTP",
                // Apple's client secrets for the token exchange, signed with a file-kept key.
                "EscrowCustody",
                // Built before these tests: they run the real binary beside an in-process server.
                "profile-escrow",
                "ProfileEscrow",
                "EscrowSQLite",
                "EscrowCore",
                "EscrowCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ProfileEscrowClientTests",
            dependencies: [
                "ProfileEscrowClient",
                "EscrowTestSupport",
                // Built before these tests: they run the real `serve` the library talks to.
                "profile-escrow",
                // Identity tokens signed by a stand-in for Apple's RSA key.
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Benchmarks (ordo-one/benchmark), only when asked for, so library users never build them:
//   ENABLE_ESCROW_BENCHMARKS=1 swift package benchmark      (see docs/performance.md)
if Context.environment["ENABLE_ESCROW_BENCHMARKS"] != nil {
    package.dependencies.append(
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"])
    )
    package.targets.append(
        .executableTarget(
            name: "EscrowBenchmarks",
            dependencies: [
                "ProfileEscrow", "EscrowSQLite", "EscrowPostgres", "EscrowCore", "EscrowCrypto", "EscrowCustody",
                "CSodium",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/EscrowBenchmarks",
            swiftSettings: [.enableUpcomingFeature("ExistentialAny")],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    )
}

// Fuzz targets (libFuzzer), only when asked for, so library users never build them:
//   scripts/fuzz.sh TARGET [seconds]                         (see docs/fuzzing.md)
// Each target calls a decoder of untrusted bytes through its `package` entry point.
if Context.environment["ENABLE_ESCROW_FUZZING"] != nil {
    let fuzzTargets: [(String, [Target.Dependency])] = [
        ("FuzzProfileJSON", ["EscrowCore", "EscrowCrypto"]),
        ("FuzzKeyringFile", ["EscrowCrypto"]),
        (
            "FuzzStoredRow",
            ["EscrowSQLite", "EscrowCore", "EscrowCrypto", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        ("FuzzAppleNotification", ["EscrowHTTP"]),
        ("FuzzRetryAfter", ["ProfileEscrow"]),
    ]
    for (name, dependencies) in fuzzTargets {
        package.targets.append(
            .executableTarget(
                name: name,
                dependencies: dependencies,
                path: "Fuzz/\(name)",
                // libFuzzer supplies `main`; the target only exports LLVMFuzzerTestOneInput.
                swiftSettings: swiftSettings + [.unsafeFlags(["-parse-as-library"])]
            )
        )
    }
}
