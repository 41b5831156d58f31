import ArgumentParser
import EscrowHTTP
import Foundation

/// `serve`'s HTTPS: the certificate and key of both listeners, and the CA of mutual TLS on `--port`. Each also from
/// its `PROFILE_ESCROW_…` variable.
struct TLSOptions: ParsableArguments {
    @Option(
        name: .customLong("tls-certificate"),
        help: """
            Serve HTTPS on both listeners with this PEM certificate chain, reloaded when it changes \
            (env PROFILE_ESCROW_TLS_CERTIFICATE; with --tls-key).
            """
    )
    var certificate: String?
    @Option(
        name: .customLong("tls-key"),
        help: "The PEM private key of --tls-certificate (env PROFILE_ESCROW_TLS_KEY)."
    )
    var key: String?
    @Option(
        name: .customLong("tls-client-ca"),
        help: """
            Clients of --port must present a certificate from this PEM CA (mutual TLS; the --public-port listener \
            never asks) (env PROFILE_ESCROW_TLS_CLIENT_CA).
            """
    )
    var clientCA: String?

    /// The TLS files: both or neither, the client CA readable; nil for plain HTTP. Their contents are checked once,
    /// by ``check(_:)``.
    func files(_ environment: OptionEnvironment) throws -> EscrowServer.TLSFiles? {
        let certificate = try environment.value(certificate, "tls-certificate")
        let key = try environment.value(key, "tls-key")
        let clientCA = try environment.value(clientCA, "tls-client-ca")
        guard let certificate, let key else {
            if certificate != nil || key != nil { throw ValidationError("--tls-certificate and --tls-key go together") }
            if clientCA != nil { throw ValidationError("--tls-client-ca needs --tls-certificate and --tls-key") }
            return nil
        }
        if let clientCA, !FileManager.default.isReadableFile(atPath: clientCA) {
            throw ValidationError("--tls-client-ca: cannot read \(clientCA)")
        }
        return EscrowServer.TLSFiles(certificatePath: certificate, keyPath: key, clientCAPath: clientCA)
    }

    /// Reads the pair as the server will: a file that does not load, or a key that is not the certificate's, is a
    /// usage error naming the file, before anything is opened.
    func check(_ files: EscrowServer.TLSFiles?) throws {
        do {
            _ = try files?.load()
        } catch {
            throw ValidationError("\(error)")
        }
    }
}
