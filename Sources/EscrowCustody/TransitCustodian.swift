import AsyncHTTPClient
public import EscrowCrypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

/// Key custody through OpenBao or Vault Transit: `POST /v1/<mount>/encrypt/<key>` and `decrypt`, each
/// with the wrapped secret's associated data (the key must be an AEAD type, `aes256-gcm96`). The token is sent as
/// `X-Vault-Token`; every request has a deadline (``timeout``).
///
/// The secret crosses the HTTP client's buffers in base64 once per wrap or unwrap (at start and at each keyring
/// reload): the request body is written into one buffer that is zeroed once the request is over, and the decrypted
/// answer is decoded straight into ``SecretBytes`` and then zeroed. Plain `http` is refused unless the address is
/// loopback (``KeyCustody/Transit/cleartextRemoteHost``).
public struct TransitCustodian: KeyCustodian {
    public let transit: KeyCustody.Transit
    let token: CustodyCredential
    /// The bound of each request, connection included.
    public var timeout: Duration

    /// - Parameter environment: where the token comes from: `PROFILE_ESCROW_TRANSIT_TOKEN`, or a file named by
    ///   `PROFILE_ESCROW_TRANSIT_TOKEN_FILE`.
    public init(_ transit: KeyCustody.Transit, environment: [String: String], timeout: Duration = .seconds(10)) {
        self.transit = transit
        self.token = CustodyCredential(
            variable: "PROFILE_ESCROW_TRANSIT_TOKEN",
            name: "Transit token",
            environment: environment
        )
        self.timeout = timeout
    }

    public var engine: String { KeyCustody.transit(transit).engine }

    public func wrap(_ secret: SecretBytes, associatedData: [UInt8]) async throws(CryptoError) -> [UInt8] {
        // The body holds the secret in base64: written straight from secret memory into the one buffer the request
        // sends, which ``post(_:body:)`` zeroes once the request is over.
        let plaintext = secret.base64Encoded()
        let associated = Array(Data(associatedData).base64EncodedString().utf8)
        var body = ByteBufferAllocator().buffer(capacity: plaintext.count + associated.count + 64)
        body.writeString(#"{"plaintext":""#)
        plaintext.withUnsafeBytes { _ = body.writeBytes($0) }
        body.writeString(#"","associated_data":""#)
        body.writeBytes(associated)
        body.writeString(#""}"#)
        let answer = try await post("encrypt", body: body)
        return try ciphertext(in: answer)
    }

    public func unwrap(_ wrapped: [UInt8], associatedData: [UInt8]) async throws(CryptoError) -> SecretBytes {
        let body = try requestBody(ciphertext: wrapped, associatedData: associatedData)
        var answer = try await post("decrypt", body: body)
        defer { Self.zero(&answer) }
        // The plaintext is found and decoded in place: it never becomes a String.
        let secret = answer.withUnsafeReadableBytes { bytes -> SecretBytes? in
            guard let value = Self.stringValue(of: "plaintext", in: bytes) else { return nil }
            return SecretBytes.decodingBase64(value, maximum: 1024)
        }
        guard let secret else {
            throw CryptoError(code: .custodyUnavailable, message: "\(engine): the decrypt answer has no plaintext")
        }
        return secret
    }

    /// Decrypts, then encrypts under the key's newest version: Transit's own `rewrap` endpoint does not take
    /// `associated_data` (it fails to authenticate a ciphertext bound to some), so the secret crosses this process
    /// once, as at any unwrap.
    public func rewrap(_ wrapped: [UInt8], associatedData: [UInt8]) async throws(CryptoError) -> [UInt8] {
        let secret = try await unwrap(wrapped, associatedData: associatedData)
        return try await wrap(secret, associatedData: associatedData)
    }

    /// `{"ciphertext": "vault:v…", "associated_data": …}`; the blob is the ciphertext's ASCII.
    private func requestBody(ciphertext: [UInt8], associatedData: [UInt8]) throws(CryptoError) -> ByteBuffer {
        guard ciphertext.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != 0x5C }) else {
            throw CryptoError(
                code: .wrappedKeyInvalid,
                message: "\(engine): a wrapped secret key is not a Transit ciphertext"
            )
        }
        var body = ByteBufferAllocator().buffer(capacity: ciphertext.count + 128)
        body.writeString(#"{"ciphertext":""#)
        body.writeBytes(ciphertext)
        body.writeString(#"","associated_data":""#)
        body.writeString(Data(associatedData).base64EncodedString())
        body.writeString(#""}"#)
        return body
    }

    /// Overwrites the bytes of `buffer`'s storage with zeros, in place: also what any copy of it shares (the request
    /// that sent it), never a copy made for the write. Call it only once nothing reads the buffer any more.
    static func zero(_ buffer: inout ByteBuffer) {
        buffer.withUnsafeReadableBytes { bytes in
            guard let base = bytes.baseAddress, bytes.count > 0 else { return }
            _ = memset(UnsafeMutableRawPointer(mutating: base), 0, bytes.count)
        }
    }

    private func ciphertext(in answer: ByteBuffer) throws(CryptoError) -> [UInt8] {
        let value = answer.withUnsafeReadableBytes { bytes in
            Self.stringValue(of: "ciphertext", in: bytes).map { Array($0) }
        }
        guard let value, value.starts(with: Array("vault:v".utf8)) else {
            throw CryptoError(code: .custodyUnavailable, message: "\(engine): the answer has no Transit ciphertext")
        }
        return value
    }

    /// `POST /v1/<mount>/<operation>/<key>` (``send(_:path:operation:body:)``).
    func post(_ operation: String, body: ByteBuffer) async throws(CryptoError) -> ByteBuffer {
        try await send(.POST, path: "\(operation)/\(transit.key)", operation: operation, body: body)
    }

    /// Sends one request to `/v1/<mount>/<path>` and returns the body of a 200 (or 204) answer; anything else is a
    /// ``CryptoError`` naming the engine and the cause (`operation` in words). `body` is zeroed when the request is
    /// over, whatever its outcome (an encrypt body holds the secret in base64). Plain `http` to a host that is not
    /// loopback is refused before anything is sent.
    func send(
        _ method: HTTPMethod,
        path: String,
        operation: String,
        body: ByteBuffer?
    ) async throws(CryptoError) -> ByteBuffer {
        var body = body
        defer { if body != nil { Self.zero(&body!) } }
        if let refusal = transit.cleartextRefusal {
            throw CryptoError(code: .custodyRefused, message: "\(engine): refused: \(refusal)")
        }
        let safe = { (text: String) in
            !text.isEmpty
                && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        }
        guard safe(transit.mount), safe(transit.key), !transit.key.contains("/") else {
            throw CryptoError(
                code: .custodyRefused,
                message: "\(engine): the mount or key name holds a character a URL path cannot"
            )
        }
        let token = try self.token.read(engine: engine)
        var request = HTTPClientRequest(url: "\(transit.address)/v1/\(transit.mount)/\(path)")
        request.method = method
        token.withUnsafeBytes { request.headers.add(name: "X-Vault-Token", value: String(decoding: $0, as: UTF8.self)) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(body)
        }

        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = transit.caFile {
            tls.trustRoots = .file(caFile)
        }
        let seconds = Int64(timeout.components.seconds)
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls,
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(max(1, seconds)), read: .seconds(max(1, seconds)))
        )
        configuration.httpVersion = .http1Only
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let outcome: Result<(HTTPResponseStatus, ByteBuffer), any Error>
        do {
            let response = try await client.execute(request, deadline: .now() + .seconds(max(1, seconds)))
            let answer = try await response.body.collect(upTo: 1 << 20)
            outcome = .success((response.status, answer))
        } catch {
            outcome = .failure(error)
        }
        try? await client.shutdown()

        switch outcome {
        case .failure(let error):
            throw CryptoError(code: .custodyUnavailable, message: "\(engine): unreachable (\(Self.describe(error)))")
        case .success(let (status, answer)):
            // 204: an operation that answers nothing (a key import).
            if status == .ok || status == .noContent { return answer }
            let reason = Self.firstError(in: answer)
            switch status.code {
            case 400 where Self.isDecryptionFailure(reason):
                throw CryptoError(
                    code: .wrappedKeyInvalid,
                    message: "\(engine): refused to \(operation) a wrapped secret key (altered, or moved to another "
                        + "keyring or version): \(reason)"
                )
            case 400, 404:
                throw CryptoError(
                    code: .custodyRefused,
                    message: "\(engine): \(operation) refused (HTTP \(status.code)): \(reason)"
                )
            case 401, 403:
                throw CryptoError(
                    code: .custodyRefused,
                    message: "\(engine): permission denied (a wrong or expired token, or a policy without "
                        + "\(transit.mount)/\(path)): \(reason)"
                )
            default:
                throw CryptoError(
                    code: .custodyUnavailable,
                    message: "\(engine): \(operation) failed (HTTP \(status.code), sealed or unavailable?): \(reason)"
                )
            }
        }
    }

    /// The error text of a Vault answer (`{"errors": ["…"]}`), printable ASCII only, at most 200 characters.
    static func firstError(in answer: ByteBuffer) -> String {
        let data = Data(answer.readableBytesView)
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        let text = (object?["errors"] as? [Any])?.compactMap { $0 as? String }.joined(separator: "; ") ?? "no detail"
        let printable = String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F ? $0 : " " }
            )
        )
        let squeezed = printable.split(separator: " ").joined(separator: " ")
        return squeezed.count > 200 ? String(squeezed.prefix(200)) + "…" : squeezed
    }

    static func isDecryptionFailure(_ reason: String) -> Bool {
        let lowered = reason.lowercased()
        return ["message authentication failed", "unable to decrypt", "invalid ciphertext", "decryption failed"]
            .contains { lowered.contains($0) }
    }

    /// A connection error in words, without any request content.
    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout, .connectTimeout: return "no answer in time"
            default: return "\(error)"
            }
        }
        let text = String(describing: error)
        return text.count > 200 ? String(text.prefix(200)) + "…" : text
    }

    /// The bytes of the JSON string value of `"name":"…"` (its first occurrence), without unescaping (base64 and
    /// Transit ciphertexts hold no escapes); nil when absent.
    static func stringValue(of name: String, in bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let needle = Array("\"\(name)\":\"".utf8)
        guard bytes.count >= needle.count else { return nil }
        for start in 0...(bytes.count - needle.count) {
            guard zip(needle.indices, needle).allSatisfy({ bytes[start + $0] == $1 }) else { continue }
            let valueStart = start + needle.count
            guard let end = bytes[valueStart...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
            return UnsafeRawBufferPointer(rebasing: bytes[valueStart..<end])
        }
        return nil
    }
}
