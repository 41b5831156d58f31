import ArgumentParser
import EscrowHTTP
import Logging
import NIOSSL

/// `serve`'s TLS: a certificate and key (PEM files, taken up again when they change) and, for mutual TLS, the CA
/// whose client certificates the API requires. Each also from its `PROFILE_ESCROW_…` variable.
struct TLSOptions: ParsableArguments {
    @Option(
        name: .customLong("tls-certificate"),
        help: """
            PEM certificate chain to serve HTTPS with, reloaded when it changes \
            (env PROFILE_ESCROW_TLS_CERTIFICATE).
            """
    )
    var certificate: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key of that certificate (env PROFILE_ESCROW_TLS_KEY).")
    var key: String?
    @Option(
        name: .customLong("tls-client-ca"),
        help: """
            PEM CA file: callers of the API must present a client certificate it signed, mutual TLS \
            (env PROFILE_ESCROW_TLS_CLIENT_CA).
            """
    )
    var clientCA: String?

    /// The files, or nil for plain HTTP; a half-given pair is a usage error.
    func serverTLS(_ environment: OptionEnvironment = .process) throws -> ServerTLS? {
        let certificate = try environment.value(certificate, "tls-certificate")
        let key = try environment.value(key, "tls-key")
        let clientCA = try environment.value(clientCA, "tls-client-ca")
        switch (certificate, key) {
        case (nil, nil):
            if clientCA != nil { throw ValidationError("--tls-client-ca needs --tls-certificate and --tls-key") }
            return nil
        case (let certificate?, let key?):
            return ServerTLS(certificatePath: certificate, keyPath: key, clientCAPath: clientCA)
        default:
            throw ValidationError("TLS needs both --tls-certificate and --tls-key (or neither)")
        }
    }

    /// The listener's TLS configuration; a file that does not load is a usage error naming it.
    func configuration(logger: Logger) throws -> TLSConfiguration? {
        guard let files = try serverTLS() else { return nil }
        do {
            return try files.configuration(logger: logger)
        } catch let error as TLSFileError {
            throw ValidationError(error.description)
        }
    }
}

/// TLS toward the backend: a private CA to trust, and a client certificate to present.
struct BackendTLSOptions: ParsableArguments {
    @Option(
        name: .customLong("backend-ca"),
        help: """
            PEM CA file to verify an https backend with, instead of the system's roots \
            (env PROFILE_ESCROW_BACKEND_CA).
            """
    )
    var ca: String?
    @Option(
        name: .customLong("backend-client-certificate"),
        help: "PEM client certificate presented to the backend (env PROFILE_ESCROW_BACKEND_CLIENT_CERTIFICATE)."
    )
    var clientCertificate: String?
    @Option(
        name: .customLong("backend-client-key"),
        help: "PEM private key of that client certificate (env PROFILE_ESCROW_BACKEND_CLIENT_KEY)."
    )
    var clientKey: String?

    /// Nil when nothing is set (the system's roots, no client certificate); files that do not load are usage errors
    /// naming them.
    func configuration(_ environment: OptionEnvironment = .process) throws -> TLSConfiguration? {
        let ca = try environment.value(ca, "backend-ca")
        let certificate = try environment.value(clientCertificate, "backend-client-certificate")
        let key = try environment.value(clientKey, "backend-client-key")
        guard ca != nil || certificate != nil || key != nil else { return nil }
        guard (certificate == nil) == (key == nil) else {
            throw ValidationError("--backend-client-certificate and --backend-client-key go together")
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if let ca {
            let roots = try Self.load(ca, "--backend-ca") { try NIOSSLCertificate.fromPEMFile($0) }
            guard !roots.isEmpty else { throw ValidationError("--backend-ca: \(ca) holds no certificate") }
            tls.trustRoots = .certificates(roots)
        }
        if let certificate, let key {
            let chain = try Self.load(certificate, "--backend-client-certificate") {
                try NIOSSLCertificate.fromPEMFile($0)
            }
            guard !chain.isEmpty else {
                throw ValidationError("--backend-client-certificate: \(certificate) holds no certificate")
            }
            tls.certificateChain = chain.map { .certificate($0) }
            tls.privateKey = .privateKey(
                try Self.load(key, "--backend-client-key") { try NIOSSLPrivateKey(file: $0, format: .pem) }
            )
        }
        do {
            _ = try NIOSSLContext(configuration: tls)
        } catch {
            throw ValidationError("backend TLS: the client certificate and key do not load together (\(error))")
        }
        return tls
    }

    private static func load<T>(_ path: String, _ option: String, _ body: (String) throws -> T) throws -> T {
        do {
            return try body(path)
        } catch {
            throw ValidationError("\(option): \(path) does not load (\("\(error)".prefix(200)))")
        }
    }
}
