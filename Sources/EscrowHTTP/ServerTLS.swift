import Foundation
public import Logging
import NIOConcurrencyHelpers
import NIOCore
public import NIOSSL

/// TLS for a listener of `serve`: a certificate chain and its key from PEM files, taken up again when the files
/// change (a renewed certificate is served from the next handshake on, without a restart), and optionally a CA
/// whose client certificates the listener requires (mutual TLS).
///
/// The files are checked at most once a second, at a handshake. A replacement that does not load (a key that does
/// not match, a half-written file) is refused with an error in the log, and the certificate in use stays: a bad
/// renewal never takes the service down. TLS 1.2 is the lowest version offered.
public struct ServerTLS: Sendable {
    public var certificatePath: String
    public var keyPath: String
    /// When set, every client must present a certificate signed by one of this file's CAs.
    public var clientCAPath: String?

    public init(certificatePath: String, keyPath: String, clientCAPath: String? = nil) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        self.clientCAPath = clientCAPath
    }

    /// The listener's configuration; throws naming the file when one does not load.
    public func configuration(logger: Logger) throws -> TLSConfiguration {
        let reloader = try CertificateReloader(certificatePath: certificatePath, keyPath: keyPath, logger: logger)
        let loaded = reloader.loaded
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: loaded.chain.map { .certificate($0) },
            privateKey: .privateKey(loaded.key)
        )
        configuration.minimumTLSVersion = .tlsv12
        if let clientCAPath {
            let roots: [NIOSSLCertificate]
            do {
                roots = try NIOSSLCertificate.fromPEMFile(clientCAPath)
            } catch {
                throw TLSFileError(path: clientCAPath, what: "client CA", error: error)
            }
            guard !roots.isEmpty else { throw TLSFileError(path: clientCAPath, what: "client CA", error: nil) }
            configuration.trustRoots = .certificates(roots)
            // Servers ask for the client's certificate and refuse a handshake without a valid one.
            configuration.certificateVerification = .noHostnameVerification
        }
        configuration.sslContextCallback = { _, promise in
            promise.succeed(reloader.override())
        }
        // Checked once here, so that a bad file stops the start with its name rather than failing every handshake.
        _ = try NIOSSLContext(configuration: configuration)
        return configuration
    }
}

/// A TLS file that does not load: named, with the reason, never its content.
public struct TLSFileError: Error, CustomStringConvertible {
    public let path: String
    public let what: String
    let reason: String

    init(path: String, what: String, error: (any Error)?) {
        self.path = path
        self.what = what
        self.reason = error.map { "\($0)".prefix(200).description } ?? "no certificate in it"
    }

    public var description: String { "the TLS \(what) file \(path) does not load: \(reason)" }
}

/// The certificate chain and key in use, re-read when their files change.
final class CertificateReloader: Sendable {
    struct Loaded: @unchecked Sendable {
        // NIOSSLCertificate and NIOSSLPrivateKey are immutable wrappers of BoringSSL objects, safe to share.
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        let stamp: FileStamp
    }

    /// What identifies a file's content without reading it: a replaced or rewritten file changes one of these.
    struct FileStamp: Equatable, Sendable {
        var certificate: [Int]
        var key: [Int]
    }

    struct State: Sendable {
        var current: Loaded
        /// Whether `current` is other than what the listener's context was built with.
        var replaced = false
        var lastCheck = ContinuousClock.now
        /// The stamp of a replacement that failed to load, so that it is reported once, not at every check.
        var refused: FileStamp?
    }

    let certificatePath: String
    let keyPath: String
    let logger: Logger
    let loaded: Loaded
    private let state: NIOLockedValueBox<State>

    init(certificatePath: String, keyPath: String, logger: Logger) throws {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        self.logger = logger
        let loaded = try Self.load(certificatePath: certificatePath, keyPath: keyPath)
        self.loaded = loaded
        self.state = NIOLockedValueBox(State(current: loaded))
    }

    /// What this handshake should use: nothing new while the files are the ones loaded, else the reloaded pair.
    func override() -> NIOSSLContextConfigurationOverride {
        let now = ContinuousClock.now
        let due = state.withLockedValue { state -> Bool in
            guard now - state.lastCheck >= .seconds(1) else { return false }
            state.lastCheck = now
            return true
        }
        if due { reloadIfChanged() }
        let (current, replaced) = state.withLockedValue { ($0.current, $0.replaced) }
        guard replaced else { return .noChanges }
        var override = NIOSSLContextConfigurationOverride()
        override.certificateChain = current.chain.map { .certificate($0) }
        override.privateKey = .privateKey(current.key)
        return override
    }

    private func reloadIfChanged() {
        let stamp = Self.stamp(certificatePath: certificatePath, keyPath: keyPath)
        let (known, refused) = state.withLockedValue { ($0.current.stamp, $0.refused) }
        guard stamp != known, stamp != refused else { return }
        do {
            let fresh = try Self.load(certificatePath: certificatePath, keyPath: keyPath)
            state.withLockedValue {
                $0.current = fresh
                $0.replaced = true
                $0.refused = nil
            }
            logger.notice("TLS certificate reloaded", metadata: ["tls.certificate": "\(certificatePath)"])
        } catch {
            state.withLockedValue { $0.refused = stamp }
            logger.error(
                "TLS certificate not reloaded: the certificate in use stays",
                metadata: ["tls.certificate": "\(certificatePath)", "error": "\(error)"]
            )
        }
    }

    static func load(certificatePath: String, keyPath: String) throws -> Loaded {
        // The stamp first: a file replaced while it is read is read again at the next check.
        let stamp = stamp(certificatePath: certificatePath, keyPath: keyPath)
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw TLSFileError(path: certificatePath, what: "certificate", error: error)
        }
        guard !chain.isEmpty else { throw TLSFileError(path: certificatePath, what: "certificate", error: nil) }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw TLSFileError(path: keyPath, what: "key", error: error)
        }
        // A key that is not the certificate's fails here, not at every handshake.
        var check = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) },
            privateKey: .privateKey(key)
        )
        check.minimumTLSVersion = .tlsv12
        do {
            _ = try NIOSSLContext(configuration: check)
        } catch {
            throw TLSFileError(path: keyPath, what: "key (for this certificate)", error: error)
        }
        return Loaded(chain: chain, key: key, stamp: stamp)
    }

    static func stamp(certificatePath: String, keyPath: String) -> FileStamp {
        func of(_ path: String) -> [Int] {
            var info = stat()
            guard stat(path, &info) == 0 else { return [] }
            return [
                Int(info.st_dev), Int(info.st_ino), Int(info.st_size), Int(info.st_mtim.tv_sec),
                Int(info.st_mtim.tv_nsec),
            ]
        }
        return FileStamp(certificate: of(certificatePath), key: of(keyPath))
    }
}
