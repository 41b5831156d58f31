import Foundation
public import Logging
import NIOConcurrencyHelpers
import NIOCore
public import NIOSSL
public import ServiceLifecycle

/// The server's certificate chain and private key, read from PEM files and read again when they change (a renewed
/// certificate is served from the next TLS handshake on; connections already open keep theirs). Every handshake
/// takes the pair in place at that moment, through NIOSSL's per-handshake context callback.
///
/// A pair that does not load (a half-written file, a key that does not match the certificate) is logged and
/// ignored: the pair in use stays.
public final class TLSCertificateFiles: Sendable {
    public let certificatePath: String
    public let keyPath: String

    private struct Pair: Sendable {
        var chain: [NIOSSLCertificate]
        var key: NIOSSLPrivateKey
        var fingerprint: [[Int]?]
    }

    private let pair: NIOLockedValueBox<Pair>

    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Reads both files; throws naming the file that does not load, or saying the key is not the certificate's.
    public init(certificatePath: String, keyPath: String) throws {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        pair = NIOLockedValueBox(try Self.load(certificatePath, keyPath))
    }

    private static func load(_ certificatePath: String, _ keyPath: String) throws -> Pair {
        let fingerprint = [Self.fingerprint(certificatePath), Self.fingerprint(keyPath)]
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw LoadError(description: "the TLS certificate \(certificatePath) does not load as PEM (\(error))")
        }
        guard !chain.isEmpty else { throw LoadError(description: "the TLS certificate \(certificatePath) is empty") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            // Never the key's bytes: only where it is.
            throw LoadError(description: "the TLS key \(keyPath) does not load as a PEM private key")
        }
        // BoringSSL checks that the key is the leaf certificate's when a context is made with both.
        do {
            _ = try NIOSSLContext(
                configuration: .makeServerConfiguration(
                    certificateChain: chain.map { .certificate($0) },
                    privateKey: .privateKey(key)
                )
            )
        } catch {
            throw LoadError(description: "the TLS key \(keyPath) is not the key of the certificate \(certificatePath)")
        }
        return Pair(chain: chain, key: key, fingerprint: fingerprint)
    }

    /// Reads the files again if either changed (inode, size or modification time). Whether the pair
    /// in use changed; a pair that does not load is logged and left out.
    @discardableResult
    public func reloadIfChanged(logger: Logger) -> Bool {
        let now = [Self.fingerprint(certificatePath), Self.fingerprint(keyPath)]
        guard now != pair.withLockedValue({ $0.fingerprint }) else { return false }
        do {
            let loaded = try Self.load(certificatePath, keyPath)
            pair.withLockedValue { $0 = loaded }
            logger.notice("TLS certificate reloaded", metadata: ["tls.certificate": "\(certificatePath)"])
            return true
        } catch {
            // Not tried again until the files change once more.
            pair.withLockedValue { $0.fingerprint = now }
            logger.error(
                "TLS certificate not reloaded; the one in use stays",
                metadata: ["tls.certificate": "\(certificatePath)", "error": "\(error)"]
            )
            return false
        }
    }

    /// A server configuration serving the current pair at every handshake; with `clientCA`, clients must present a
    /// certificate issued by it (mutual TLS). TLS 1.2 at least.
    public func serverConfiguration(clientCA: String? = nil) -> TLSConfiguration {
        let current = pair.withLockedValue { $0 }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: current.chain.map { .certificate($0) },
            privateKey: .privateKey(current.key)
        )
        configuration.minimumTLSVersion = .tlsv12
        if let clientCA {
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .file(clientCA)
            configuration.sendCANameList = true
        }
        configuration.sslContextCallback = { [pair] _, promise in
            let current = pair.withLockedValue { $0 }
            var override = NIOSSLContextConfigurationOverride()
            override.certificateChain = current.chain.map { .certificate($0) }
            override.privateKey = .privateKey(current.key)
            promise.succeed(override)
        }
        return configuration
    }

    /// The file behind `path` (symbolic links followed: a Kubernetes secret's swap counts): its inode, size and
    /// modification time.
    static func fingerprint(_ path: String) -> [Int]? {
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: target) else { return nil }
        let modified = (attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        return [
            (attributes[.systemFileNumber] as? Int) ?? 0, (attributes[.size] as? Int) ?? 0,
            Int((modified * 1e9).rounded()),
        ]
    }
}

/// Looks at ``TLSCertificateFiles`` every `interval` and reloads them when they changed (a certificate renewed by
/// certbot, a Kubernetes secret's symlink swap).
public struct TLSReloader: Service {
    let files: TLSCertificateFiles
    let interval: Duration
    let logger: Logger

    public init(files: TLSCertificateFiles, interval: Duration = .seconds(5), logger: Logger) {
        self.files = files
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            files.reloadIfChanged(logger: logger)
        }
    }
}
