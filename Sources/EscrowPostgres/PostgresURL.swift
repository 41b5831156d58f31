import EscrowCore
import Foundation
import NIOSSL
public import PostgresNIO

/// A `postgres://` or `postgresql://` connection URL, read the way libpq reads it:
/// `postgresql://user:password@host:port/database?sslmode=verify-full&application_name=…`.
///
/// - Host: a name, an IPv4 address or a bracketed IPv6 address; or a Unix socket directory, given as a
///   percent-encoded path (`postgresql://%2Fvar%2Frun%2Fpostgresql/escrow`) or as `?host=/var/run/postgresql`.
///   Without one, the server's default socket directory (`/var/run/postgresql` on Debian), as libpq does.
/// - Port 5432 unless given; user `PGUSER`, else the login name; password `PGPASSWORD` when the URL has none;
///   database the user's name unless given.
/// - `sslmode` (ignored over a Unix socket, as by libpq): `disable`, `prefer` (the default: TLS when the server offers
///   it, certificate not checked),
///   `require` (TLS, certificate not checked), `verify-ca` (TLS, certificate checked against the trust roots),
///   `verify-full` (also the host name). `sslrootcert` names a PEM file of trust roots (default: the system's).
/// - Several hosts, as libpq allows: `postgresql://db1:5432,db2:5432/escrow?target_session_attrs=read-write`
///   (each `host[:port]`; one without a port takes `port=` or 5432). `target_session_attrs` (libpq's values: `any`,
///   the default; `read-write`; `read-only`; `primary`; `standby`; `prefer-standby`) says which of them the store
///   uses: the first, in order, that is what it asks for (a standby is a server in recovery), and another once that
///   one fails or changes (a failover).
/// - Also `connect_timeout` (seconds) and `application_name`. Any other parameter is refused, as libpq does.
///
/// The password is kept only in the connection configuration: ``description`` and every error leave it out.
public struct PostgresURL: Sendable, CustomStringConvertible {
    /// libpq's `sslmode` values this store supports.
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable
        case prefer
        case require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    /// One `host:port` of a multi-host URL.
    public struct Endpoint: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// libpq's `target_session_attrs`: which host of a multi-host URL the store uses.
    public enum TargetSessionAttributes: String, Sendable, CaseIterable {
        case any
        case readWrite = "read-write"
        case readOnly = "read-only"
        case primary
        case standby
        case preferStandby = "prefer-standby"

        /// Whether a server, a standby in recovery or not, is one to use (`prefer-standby` takes a primary only when
        /// no host is a standby).
        func accepts(standby: Bool) -> Bool {
            switch self {
            case .any: true
            case .readWrite, .primary: !standby
            case .readOnly, .standby, .preferStandby: standby
            }
        }
    }

    public var host: String?
    /// Every host of a multi-host URL, in order (empty for a URL with one host); ``host`` and ``port`` are the first.
    public var endpoints: [Endpoint] = []
    public var targetSessionAttributes: TargetSessionAttributes = .any
    public var unixSocketPath: String?
    public var port: Int
    public var user: String
    public var database: String
    public var sslMode: SSLMode
    public var sslRootCertificate: String?
    public var applicationName: String?
    public var connectTimeout: Double?
    /// Never printed: not part of ``description``.
    var password: String?

    /// Whether `text` is a PostgreSQL URL (and not a file path).
    public static func isPostgresURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Parses `text`. Errors never repeat the URL (it may hold a password).
    public init(_ text: String, environment: [String: String]? = nil) throws {
        let environment = environment ?? ProcessInfo.processInfo.environment
        guard Self.isPostgresURL(text) else { throw Self.invalid("it must start with postgres:// or postgresql://") }
        let (text, hosts) = try Self.splittingHosts(text)
        // Foundation's parser wants a host; libpq allows `postgresql:///db` (default socket).
        guard let components = URLComponents(string: text) else {
            throw Self.invalid("it is not a valid URL (reserved characters in a password must be percent-encoded)")
        }
        var host: String? = components.percentEncodedHost.flatMap { $0.removingPercentEncoding }
        if let h = host, h.isEmpty { host = nil }
        if let h = host, h.hasPrefix("["), h.hasSuffix("]") { host = String(h.dropFirst().dropLast()) }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw Self.invalid("the port must be 1-65535") }
        self.port = port
        let login = environment["PGUSER"] ?? environment["USER"] ?? "postgres"
        self.user =
            components.percentEncodedUser.flatMap { $0.removingPercentEncoding }.flatMap { $0.isEmpty ? nil : $0 }
            ?? login
        self.password =
            components.percentEncodedPassword.flatMap { $0.removingPercentEncoding } ?? environment["PGPASSWORD"]
        let path = components.percentEncodedPath.removingPercentEncoding ?? ""
        let name = path.hasPrefix("/") ? String(path.dropFirst()) : path
        guard !name.contains("/") else { throw Self.invalid("the database name must not contain '/'") }
        self.database = name.isEmpty ? user : name
        self.sslMode = .prefer
        for item in components.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "sslmode":
                if value == "allow" {
                    throw Self.invalid("sslmode=allow is not supported: use prefer, require, verify-ca or verify-full")
                }
                guard let mode = SSLMode(rawValue: value) else {
                    throw Self.invalid("sslmode must be disable, prefer, require, verify-ca or verify-full")
                }
                self.sslMode = mode
            case "sslrootcert": self.sslRootCertificate = value
            case "host": host = value
            case "port":
                guard let number = Int(value), (1...65535).contains(number) else {
                    throw Self.invalid("the port must be 1-65535")
                }
                self.port = number
            case "user": self.user = value
            case "password": self.password = value
            case "dbname": self.database = value
            case "application_name": self.applicationName = value
            case "target_session_attrs":
                guard let attributes = TargetSessionAttributes(rawValue: value) else {
                    throw Self.invalid(
                        "target_session_attrs must be any, read-write, read-only, primary, standby or prefer-standby"
                    )
                }
                self.targetSessionAttributes = attributes
            case "connect_timeout":
                guard let seconds = Double(value), seconds > 0 else {
                    throw Self.invalid("connect_timeout must be a positive number of seconds")
                }
                self.connectTimeout = seconds
            default:
                // Only the parameter's name, never its value.
                throw Self.invalid("the parameter '\(item.name.prefix(40))' is not supported")
            }
        }
        if let hosts {
            // A host of the list without a port takes `port=`, else 5432 (not the first host's port).
            let defaultPort = components.queryItems?.first { $0.name == "port" }.flatMap { Int($0.value ?? "") } ?? 5432
            endpoints = hosts.map { Endpoint(host: $0.host, port: $0.port ?? defaultPort) }
            host = endpoints[0].host
            self.port = endpoints[0].port
        }
        if let h = host, h.hasPrefix("/") {
            self.unixSocketPath = "\(h)/.s.PGSQL.\(self.port)"
            self.host = nil
        } else if let h = host {
            self.host = h
        } else {
            self.unixSocketPath = "/var/run/postgresql/.s.PGSQL.\(self.port)"
        }
    }

    /// Where it connects, without the password: `postgresql://user@host:port/database?sslmode=…`.
    public var description: String {
        let place =
            endpoints.count > 1
            ? endpoints.map(\.description).joined(separator: ",")
            : host.map { Endpoint(host: $0, port: port).description } ?? ""
        let socket = unixSocketPath.map { "&host=\(($0 as NSString).deletingLastPathComponent)" } ?? ""
        let target = targetSessionAttributes == .any ? "" : "&target_session_attrs=\(targetSessionAttributes.rawValue)"
        return "postgresql://\(user)@\(place)/\(database)?sslmode=\(sslMode.rawValue)\(socket)\(target)"
    }

    /// This URL with only `endpoint` (one host of a multi-host URL).
    public func at(_ endpoint: Endpoint) -> PostgresURL {
        var url = self
        url.host = endpoint.host
        url.port = endpoint.port
        url.endpoints = []
        return url
    }

    /// The URL's hosts when it names several (`host1:port1,host2,[::1]:port3`), and the URL with only the first of
    /// them (Foundation's parser takes one host).
    static func splittingHosts(_ text: String) throws -> (String, [(host: String, port: Int?)]?) {
        guard let scheme = text.range(of: "://") else { return (text, nil) }
        let rest = text[scheme.upperBound...]
        let end = rest.firstIndex { "/?#".contains($0) } ?? rest.endIndex
        let authority = rest[..<end]
        let start = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
        let list = authority[start...]
        guard list.contains(",") else { return (text, nil) }
        var hosts: [(host: String, port: Int?)] = []
        for item in list.split(separator: ",", omittingEmptySubsequences: false) {
            var name = item
            var port: Int?
            if name.hasPrefix("[") {
                guard let close = name.firstIndex(of: "]") else { throw invalid("an IPv6 host needs its closing ']'") }
                let after = name[name.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else {
                        throw invalid("the port must be 1-65535")
                    }
                    port = number
                }
                name = name[name.index(after: name.startIndex)..<close]
            } else if let colon = name.lastIndex(of: ":") {
                guard let number = Int(name[name.index(after: colon)...]) else {
                    throw invalid("the port must be 1-65535")
                }
                port = number
                name = name[..<colon]
            }
            guard !name.isEmpty else { throw invalid("a host of the list is empty") }
            if let port, !(1...65535).contains(port) { throw invalid("the port must be 1-65535") }
            hosts.append((String(name).removingPercentEncoding ?? String(name), port))
        }
        let first = list.prefix { $0 != "," }
        return (String(text[..<list.startIndex]) + first + String(text[list.endIndex...]), hosts)
    }

    /// The client configuration: TLS as `sslmode` asks.
    public func clientConfiguration() throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let unixSocketPath {
            configuration = PostgresClient.Configuration(
                unixSocketPath: unixSocketPath,
                username: user,
                password: password,
                database: database
            )
            configuration.tls = .disable
        } else {
            configuration = PostgresClient.Configuration(
                host: host ?? "localhost",
                port: port,
                username: user,
                password: password,
                database: database,
                tls: try tls()
            )
        }
        if let applicationName {
            configuration.options.additionalStartupParameters.append(("application_name", applicationName))
        }
        if let connectTimeout { configuration.options.connectTimeout = .milliseconds(Int64(connectTimeout * 1000)) }
        return configuration
    }

    /// One connection's configuration, the same as the pool's: for the checks at open, which must fail at once
    /// (a wrong password, a refused connection) where the pool would keep retrying.
    func connectionConfiguration(startupParameters: [(String, String)]) throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let unixSocketPath {
            configuration = PostgresConnection.Configuration(
                unixSocketPath: unixSocketPath,
                username: user,
                password: password,
                database: database
            )
        } else {
            let tls: PostgresConnection.Configuration.TLS
            switch sslMode {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(try NIOSSLContext(configuration: tlsConfiguration()))
            default: tls = .require(try NIOSSLContext(configuration: tlsConfiguration()))
            }
            configuration = PostgresConnection.Configuration(
                host: host ?? "localhost",
                port: port,
                username: user,
                password: password,
                database: database,
                tls: tls
            )
        }
        configuration.options.additionalStartupParameters = startupParameters
        if let applicationName {
            configuration.options.additionalStartupParameters.append(("application_name", applicationName))
        }
        if let connectTimeout { configuration.options.connectTimeout = .milliseconds(Int64(connectTimeout * 1000)) }
        return configuration
    }

    func tls() throws -> PostgresClient.Configuration.TLS {
        switch sslMode {
        case .disable: .disable
        case .prefer: .prefer(try tlsConfiguration())
        default: .require(try tlsConfiguration())
        }
    }

    func tlsConfiguration() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch sslMode {
        case .disable, .prefer, .require:
            // libpq checks no certificate in these modes.
            tls.certificateVerification = .none
        case .verifyCA:
            tls.certificateVerification = .noHostnameVerification
        case .verifyFull:
            tls.certificateVerification = .fullVerification
        }
        if let sslRootCertificate, sslMode == .verifyCA || sslMode == .verifyFull {
            guard FileManager.default.isReadableFile(atPath: sslRootCertificate) else {
                throw Self.invalid("sslrootcert: cannot read \(sslRootCertificate)")
            }
            tls.trustRoots = .file(sslRootCertificate)
        }
        return tls
    }

    static func invalid(_ why: String) -> EscrowStoreError {
        EscrowStoreError(.unavailable, "invalid PostgreSQL URL: \(why)")
    }
}
