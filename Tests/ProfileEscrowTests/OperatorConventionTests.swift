import EscrowTestSupport
import Foundation
import Testing

/// What an operator relies on: options from the environment, strict values, global options anywhere, logs a
/// pipeline can parse, and the auditor's report in every format.
@Suite("Operator conventions")
struct OperatorConventionTests {
    let directory = TemporaryDirectory()
    var database: String { directory.path + "/escrow.sqlite" }
    var keyring: String { directory.path + "/keyring" }

    func run(
        _ arguments: [String],
        stdin: String = "",
        environment: [String: String] = [:]
    ) async throws
        -> ProfileEscrowCLI.Result
    {
        try await ProfileEscrowCLI.run(arguments, stdin: stdin, environment: environment, in: directory.path)
    }

    static let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()

    @Test("a malformed variable is an error naming it (exit 2), never ignored")
    func malformedVariables() async throws {
        let base = [
            "PROFILE_ESCROW_DATABASE": database, "PROFILE_ESCROW_KEYRING": keyring,
            "PROFILE_ESCROW_BACKEND_URL": "http://127.0.0.1:9/", "PROFILE_ESCROW_WEBHOOK_SECRET": Self.secret,
        ]
        for (variable, value) in [
            ("PROFILE_ESCROW_METRICS_TOKEN", "maybe"), ("PROFILE_ESCROW_PORT", "eighty"),
            ("PROFILE_ESCROW_CONCURRENCY", "4x"), ("PROFILE_ESCROW_LEASE", "forever"),
            ("PROFILE_ESCROW_RATE_LIMIT", "lots"), ("PROFILE_ESCROW_LOG_LEVEL", "loud"),
            ("PROFILE_ESCROW_LOG_FORMAT", "xml"), ("PROFILE_ESCROW_NO_WORKER", "2"),
            ("PROFILE_ESCROW_MAX_ATTEMPTS", "1e3"), ("PROFILE_ESCROW_SCHEDULING", "fast"),
        ] {
            let result = try await run(["serve"], environment: base.merging([variable: value]) { $1 })
            #expect(result.status == 2, "\(variable)=\(value): \(result.stderr)")
            #expect(result.stderr.contains(variable), "\(variable) named: \(result.stderr)")
        }
        let replay = try await run(
            ["replay", "--once"],
            environment: base.merging(["PROFILE_ESCROW_METRICS_PORT": "x"]) { $1 }
        )
        #expect(replay.status == 2 && replay.stderr.contains("PROFILE_ESCROW_METRICS_PORT"))
    }

    @Test("web sign-in options: incomplete, malformed or open-redirect values are usage errors (exit 2)")
    func signInOptions() async throws {
        let base = [
            "PROFILE_ESCROW_DATABASE": database, "PROFILE_ESCROW_KEYRING": keyring,
            "PROFILE_ESCROW_BACKEND_URL": "http://127.0.0.1:9/", "PROFILE_ESCROW_WEBHOOK_SECRET": Self.secret,
            "PROFILE_ESCROW_APPLE_AUDIENCE": "invalid.example.web", "PROFILE_ESCROW_APPLE_JWKS": "/nonexistent",
        ]
        let complete = [
            "PROFILE_ESCROW_SIGNIN_CLIENT_ID": "invalid.example.web",
            "PROFILE_ESCROW_SIGNIN_CALLBACK_URL": "https://escrow.example.invalid/v1/apple/signin/callback",
            "PROFILE_ESCROW_SIGNIN_RETURN": "app=https://app.example.invalid/signed-in",
        ]
        for (variable, value, named) in [
            ("PROFILE_ESCROW_SIGNIN_RETURN", "", "--signin-return"),
            ("PROFILE_ESCROW_SIGNIN_RETURN", "app=http://app.example.invalid/", "--signin-return app"),
            ("PROFILE_ESCROW_SIGNIN_RETURN", "app=javascript:alert(1)", "--signin-return app"),
            ("PROFILE_ESCROW_SIGNIN_RETURN", "app=intent://callback#Intent;package=x.y", "--signin-return app"),
            ("PROFILE_ESCROW_SIGNIN_RETURN", "app=https://a.example.invalid/,app=https://b.example.invalid/", "twice"),
            ("PROFILE_ESCROW_SIGNIN_CALLBACK_URL", "/v1/apple/signin/callback", "--signin-callback-url"),
            ("PROFILE_ESCROW_SIGNIN_TTL", "soon", "PROFILE_ESCROW_SIGNIN_TTL"),
        ] {
            var environment = base.merging(complete) { $1 }
            environment[variable] = value
            let result = try await run(["serve"], environment: environment)
            #expect(result.status == 2, "\(variable)=\(value): \(result.stderr)")
            #expect(result.stderr.contains(named), "\(named) named: \(result.stderr)")
        }
        var withoutKeys = base.merging(complete) { $1 }
        withoutKeys["PROFILE_ESCROW_APPLE_AUDIENCE"] = nil
        withoutKeys["PROFILE_ESCROW_APPLE_JWKS"] = nil
        let result = try await run(["serve"], environment: withoutKeys)
        #expect(result.status == 2 && result.stderr.contains("--apple-jwks"), "\(result.stderr)")
        // The Services ID must be one of the audiences; a file and a URL for Apple's keys are one too many.
        var notAudience = base.merging(complete) { $1 }
        notAudience["PROFILE_ESCROW_APPLE_AUDIENCE"] = "invalid.example.app"
        let outside = try await run(["serve"], environment: notAudience)
        #expect(outside.status == 2 && outside.stderr.contains("--signin-client-id"), "\(outside.stderr)")
        var both = base.merging(complete) { $1 }
        both["PROFILE_ESCROW_APPLE_JWKS_URL"] = "https://apple.example.invalid/auth/keys"
        let twice = try await run(["serve"], environment: both)
        #expect(twice.status == 2 && twice.stderr.contains("--apple-jwks-url"), "\(twice.stderr)")
        var plain = base.merging(complete) { $1 }
        plain["PROFILE_ESCROW_APPLE_JWKS"] = nil
        plain["PROFILE_ESCROW_APPLE_JWKS_URL"] = "http://apple.example.invalid/auth/keys"
        let insecure = try await run(["serve"], environment: plain)
        #expect(insecure.status == 2 && insecure.stderr.contains("https"), "\(insecure.stderr)")
    }

    @Test("global options before the subcommand, and --version")
    func globalOptionsFirst() async throws {
        #expect(try await run(["--keyring", keyring, "keys", "init"]).status == 0)
        let body = #"{"userIdentifier":"000000.a.1","email":"someone@example.invalid"}"#
        let capture = try await run(["--database", database, "--keyring=" + keyring, "capture"], stdin: body)
        #expect(capture.status == 0, "\(capture.stderr)")
        #expect(FileManager.default.fileExists(atPath: database))
        let status = try await run(["--database", database, "--keyring", keyring, "-v", "status", "000000.a.1"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("pending"))
        let missing = try await run(["--database", database, "--keyring", keyring, "status", "000000.b.1"])
        #expect(missing.status == 3)
        let version = try await run(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.first?.isNumber == true)
    }

    @Test("replay logs one JSON object a line by default, text when asked; nothing personal")
    func jsonLogs() async throws {
        let environment = [
            "PROFILE_ESCROW_DATABASE": database, "PROFILE_ESCROW_KEYRING": keyring,
            "PROFILE_ESCROW_BACKEND_URL": "http://127.0.0.1:9/", "PROFILE_ESCROW_WEBHOOK_SECRET": Self.secret,
            "PROFILE_ESCROW_LOG_LEVEL": "debug", "PROFILE_ESCROW_BACKOFF_BASE": "1h",
        ]
        #expect(try await run(["keys", "init"], environment: environment).status == 0)
        let body = """
            {"userIdentifier":"000000.canaryuid1.0001","fullName":{"givenName":"CANARY GIVEN"},
             "email":"canarymail@example.invalid"}
            """
        #expect(try await run(["capture"], stdin: body, environment: environment).status == 0)
        let replay = try await run(["replay", "--once"], environment: environment)
        let lines = replay.stderr.split(separator: "\n").filter { !$0.isEmpty }
        #expect(!lines.isEmpty)
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["time"] is String && object?["level"] is String && object?["message"] is String, "\(line)")
        }
        for canary in ["canaryuid", "CANARY", "canarymail", Self.secret] { #expect(!replay.stderr.contains(canary)) }
        let text = try await run(
            ["replay", "--once", "--log-format", "text"],
            environment: environment.merging(["PROFILE_ESCROW_LOG_LEVEL": "debug"]) { $1 }
        )
        #expect(text.stderr.split(separator: "\n").allSatisfy { !$0.hasPrefix("{") })
    }

    @Test("purge-report: a reversed period is exit 2; csv, json and html carry the same facts")
    func purgeReportFormats() async throws {
        let environment = ["PROFILE_ESCROW_DATABASE": database, "PROFILE_ESCROW_KEYRING": keyring]
        #expect(try await run(["keys", "init"], environment: environment).status == 0)
        let body = #"{"userIdentifier":"000000.canaryuid2.0001","email":"canarymail@example.invalid"}"#
        #expect(try await run(["capture"], stdin: body, environment: environment).status == 0)
        #expect(try await run(["confirm", "000000.canaryuid2.0001"], environment: environment).status == 0)
        let reversed = try await run(["purge-report", "--since", "1h", "--until", "2h"], environment: environment)
        #expect(reversed.status == 2)
        #expect(reversed.stderr.contains("--since"))
        let csv = try await run(["purge-report", "--format", "csv", "--verify"], environment: environment)
        #expect(csv.status == 0)
        #expect(csv.stdout.contains("# chain.verified: true"))
        #expect(csv.stdout.contains("# purged.confirmed: 1"))
        #expect(csv.stdout.contains("# retentionSeconds: 2592000.000"))
        #expect(csv.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == 2)  // header + one purge
        let json = try await run(["purge-report", "--format", "json", "--verify"], environment: environment)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect((object["chain"] as? [String: Any])?["verified"] as? Bool == true)
        #expect(object["retentionSeconds"] as? Double == 2_592_000)
        #expect((object["timeToPurgeDistribution"] as? [Any])?.count == 9)
        #expect((object["purgesByHour"] as? [Any])?.count == 1)
        let html = try await run(["purge-report", "--format", "html", "--verify"], environment: environment)
        #expect(html.status == 0)
        #expect(html.stdout.hasPrefix("<!DOCTYPE html>"))
        #expect(html.stdout.contains("<svg") && html.stdout.contains("Verified"))
        // Self-contained: its stylesheet inside it, as a data: link, and nothing else fetched.
        let inlineStylesheet = "<link rel=\"stylesheet\" href=\"data:text/css;base64,"
        #expect(html.stdout.contains(inlineStylesheet))
        for external in ["http://", "https://", "<script", "<link", "@import", "url("] {
            // The SVG namespace is an identifier, not a fetch; the data: stylesheet is the document's own.
            let stripped = html.stdout.replacingOccurrences(of: "xmlns=\"http://www.w3.org/2000/svg\"", with: "")
                .replacingOccurrences(of: inlineStylesheet, with: "")
            #expect(!stripped.contains(external), "no \(external)")
        }
        for output in [csv.stdout, json.stdout, html.stdout] {
            #expect(!output.contains("canary"))
        }
    }
}
