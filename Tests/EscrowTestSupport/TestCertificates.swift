import Foundation

/// Certificates made by `openssl` for a test: a CA, and certificates it issued for a server (127.0.0.1 and
/// `localhost`) and a client.
public enum TestCertificates {
    /// `openssl` failed; its standard error says why.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// In `directory`: `<ca>.pem` and `.key`, `<ca>-server.pem` and `.key` (serverAuth, for `serverNames`),
    /// `<ca>-client.pem` and `.key` (clientAuth).
    public static func make(
        _ directory: String,
        ca: String,
        serverNames: String = "IP:127.0.0.1,DNS:localhost"
    ) async throws {
        func openssl(_ arguments: [String]) async throws {
            let result = try await ProfileEscrowCLI.run(arguments, executable: "/usr/bin/openssl", in: directory)
            guard result.status == 0 else { throw Failure(description: result.stderr) }
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try await openssl(
            ["req", "-x509"] + ec + ["-keyout", "\(ca).key", "-out", "\(ca).pem", "-days", "1", "-subj", "/CN=\(ca)"]
        )
        try "subjectAltName=\(serverNames)\nextendedKeyUsage=serverAuth\n".write(
            toFile: directory + "/\(ca)-server.ext",
            atomically: true,
            encoding: .utf8
        )
        try "extendedKeyUsage=clientAuth\n".write(
            toFile: directory + "/\(ca)-client.ext",
            atomically: true,
            encoding: .utf8
        )
        for name in ["server", "client"] {
            try await openssl(
                ["req"] + ec + ["-keyout", "\(ca)-\(name).key", "-out", "\(ca)-\(name).csr", "-subj", "/CN=\(name)"]
            )
            try await openssl([
                "x509", "-req", "-in", "\(ca)-\(name).csr", "-CA", "\(ca).pem", "-CAkey", "\(ca).key",
                "-CAcreateserial",
                "-out", "\(ca)-\(name).pem", "-days", "1", "-extfile", "\(ca)-\(name).ext",
            ])
        }
    }
}
