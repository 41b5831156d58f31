public import Crypto
import EscrowCrypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A stand-in for Apple's `/auth/token` and `/auth/revoke` on 127.0.0.1, speaking their documented formats:
/// form-encoded requests; JSON answers `{access_token, token_type, expires_in, refresh_token, id_token}`; errors
/// `{"error": "invalid_grant" | "invalid_client" | "invalid_request"}`. Every client secret it gets is verified as
/// Apple would: an ES256 JWT with the expected `kid`, `iss` the team, `sub` the `client_id`, `aud`
/// `https://appleid.apple.com`, valid now and living at most six months, signed by the team's key (whose public half
/// the test gives). Codes are issued by the test (``issueCode(user:clientID:redirectURI:)``), each redeemable once
/// within five minutes; id_tokens are signed with the stand-in's own P-256 key, published in ``jwks``.
///
/// Outages and refusals are scripted per path (``script(_:_:)``). Every request is recorded, with whether its client
/// secret verified.
public final class StandInApple: Sendable {
    /// What the stand-in does with the next request to a path, instead of its normal answer.
    public enum Scripted: Sendable, Equatable {
        /// Answers this status with an empty body (an outage: 500, 503).
        case status(Int)
        /// Answers `400 {"error": code}`.
        case error(String)
        /// Answers as it would, this many seconds late (Apple slow).
        case delay(Double)
    }

    /// One request as it came.
    public struct Request: Sendable {
        public var path: String
        public var contentType: String?
        public var form: [String: String]
        /// Whether its `client_secret` verified (nil when it had none).
        public var secretValid: Bool?
        /// Why the secret did not verify.
        public var secretProblem: String?
        public var status: Int
    }

    public let teamID: String
    public let keyID: String
    public let signingKey: P256.Signing.PublicKey
    private let idTokenKey = P256.Signing.PrivateKey()
    private let state = NIOLockedValueBox(State())
    private let channel: NIOLockedValueBox<(any Channel)?> = NIOLockedValueBox(nil)

    private struct State {
        var codes: [String: (user: String, clientID: String, redirectURI: String?, issued: Date, used: Bool)] = [:]
        var refreshTokens: [String: Bool] = [:]
        var scripts: [String: [Scripted]] = [:]
        var requests: [Request] = []
        var delaying = 0
    }

    public init(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.signingKey = publicKey
    }

    public var port: Int { channel.withLockedValue { $0?.localAddress?.port ?? 0 } }
    public var tokenURL: String { "http://127.0.0.1:\(port)/auth/token" }
    public var revokeURL: String { "http://127.0.0.1:\(port)/auth/revoke" }
    public var requests: [Request] { state.withLockedValue { $0.requests } }

    /// The JWKS of the key that signs this stand-in's id_tokens (for `AppleVerifier(jwksJSON:audiences:)`).
    public var jwks: [UInt8] {
        let raw = idTokenKey.publicKey.rawRepresentation
        let key: [String: String] = [
            "kty": "EC", "kid": "stand-in", "use": "sig", "alg": "ES256", "crv": "P-256",
            "x": Base64URL.encode(Array(raw.prefix(32))), "y": Base64URL.encode(Array(raw.suffix(32))),
        ]
        return Array(try! JSONSerialization.data(withJSONObject: ["keys": [key]]))
    }

    /// A new code for `user`, as Apple's authorization would give it to `clientID`.
    public func issueCode(user: String, clientID: String, redirectURI: String? = nil) -> String {
        let code = "c" + Hex.encode(Hashing.randomBytes(count: 16)) + ".0.stand-in"
        state.withLockedValue {
            $0.codes[code] = (user, clientID, redirectURI, Date(), false)
        }
        return code
    }

    /// The next `count` requests to `path` get `answer` instead of the normal one.
    public func script(_ path: String, _ answers: [Scripted]) {
        state.withLockedValue { $0.scripts[path, default: []] += answers }
    }

    /// Whether a refresh token it issued has been revoked.
    public func isRevoked(_ refreshToken: String) -> Bool {
        state.withLockedValue { $0.refreshTokens[refreshToken] == true }
    }

    /// The refresh tokens it issued.
    public var refreshTokens: [String] { state.withLockedValue { Array($0.refreshTokens.keys) } }

    public func start() async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(apple: self))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        channel.withLockedValue { $0 = server }
    }

    public func stop() async {
        try? await channel.withLockedValue { $0 }?.close()
    }

    // MARK: - Answers

    func answer(path: String, contentType: String?, body: [UInt8]) -> (Int, [UInt8]) {
        let form = Self.parseForm(body)
        var request = Request(path: path, contentType: contentType, form: form, status: 0)
        defer { state.withLockedValue { $0.requests.append(request) } }
        func reply(_ status: Int, _ object: [String: Any]) -> (Int, [UInt8]) {
            request.status = status
            return (status, Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])))
        }
        guard contentType?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return reply(400, ["error": "invalid_request"])
        }
        if let secret = form["client_secret"], let clientID = form["client_id"] {
            let problem = verifySecret(secret, clientID: clientID)
            request.secretValid = problem == nil
            request.secretProblem = problem
        }
        let scripted: Scripted? = state.withLockedValue { state in
            guard var queue = state.scripts[path], !queue.isEmpty else { return nil }
            let first = queue.removeFirst()
            state.scripts[path] = queue
            return first
        }
        switch scripted {
        case .status(let status):
            request.status = status
            return (status, [])
        case .error(let code): return reply(400, ["error": code])
        case .delay, nil: break  // a delay is taken before (``scriptedDelay(_:)``)
        }
        guard form["client_id"] != nil, form["client_secret"] != nil else {
            return reply(400, ["error": "invalid_request"])
        }
        guard request.secretValid == true else { return reply(400, ["error": "invalid_client"]) }
        switch path {
        case "/auth/token": return token(form, reply)
        case "/auth/revoke": return revoke(form, reply)
        default:
            request.status = 404
            return (404, [])
        }
    }

    /// The delay scripted for the next request to `path`, taken from the script when it comes first.
    func scriptedDelay(_ path: String) -> Double? {
        state.withLockedValue { state in
            guard case .delay(let seconds)? = state.scripts[path]?.first else { return nil }
            state.scripts[path]?.removeFirst()
            state.delaying += 1
            return seconds
        }
    }

    /// Requests held by a scripted delay so far (counted as they arrive, before their answer).
    public var delayed: Int { state.withLockedValue { $0.delaying } }

    private func token(_ form: [String: String], _ reply: (Int, [String: Any]) -> (Int, [UInt8])) -> (Int, [UInt8]) {
        guard form["grant_type"] == "authorization_code", let code = form["code"] else {
            return reply(400, ["error": "invalid_request"])
        }
        let granted = state.withLockedValue { state -> (user: String, clientID: String)? in
            guard let issued = state.codes[code], !issued.used, Date().timeIntervalSince(issued.issued) < 300,
                issued.clientID == form["client_id"], issued.redirectURI == form["redirect_uri"]
            else { return nil }
            state.codes[code]?.used = true
            return (issued.user, issued.clientID)
        }
        guard let granted else { return reply(400, ["error": "invalid_grant"]) }
        let refreshToken = "r" + Hex.encode(Hashing.randomBytes(count: 16)) + ".0.stand-in"
        state.withLockedValue { $0.refreshTokens[refreshToken] = false }
        return reply(
            200,
            [
                "access_token": "a" + Hex.encode(Hashing.randomBytes(count: 16)), "token_type": "Bearer",
                "expires_in": 3600, "refresh_token": refreshToken,
                "id_token": idToken(user: granted.user, clientID: granted.clientID, code: code),
            ]
        )
    }

    private func revoke(_ form: [String: String], _ reply: (Int, [String: Any]) -> (Int, [UInt8])) -> (Int, [UInt8]) {
        guard let token = form["token"] else { return reply(400, ["error": "invalid_request"]) }
        // Apple answers 200 to a token it does not know, too.
        state.withLockedValue { state in
            if state.refreshTokens[token] != nil { state.refreshTokens[token] = true }
        }
        return reply(200, [:])
    }

    private func idToken(user: String, clientID: String, code: String) -> String {
        let now = Int(Date().timeIntervalSince1970)
        let cHash = Base64URL.encode(Array(SHA256.hash(data: Array(code.utf8)).prefix(16)))
        let header = Self.json(["alg": "ES256", "kid": "stand-in"])
        let claims = Self.json([
            "iss": "https://appleid.apple.com", "aud": clientID, "sub": user, "iat": now, "exp": now + 600,
            "c_hash": cHash,
        ])
        let input = header + "." + claims
        let signature = try! idTokenKey.signature(for: Array(input.utf8))
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// Nil when `secret` is a client secret Apple accepts for `clientID`; else what is wrong with it.
    func verifySecret(_ secret: String, clientID: String) -> String? {
        let parts = secret.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(Array(parts[0].utf8)),
            let claimBytes = Base64URL.decode(Array(parts[1].utf8)),
            let signatureBytes = Base64URL.decode(Array(parts[2].utf8)),
            let header = try? JSONSerialization.jsonObject(with: Data(headerBytes)) as? [String: Any],
            let claims = try? JSONSerialization.jsonObject(with: Data(claimBytes)) as? [String: Any]
        else { return "not a JWT" }
        guard header["alg"] as? String == "ES256" else { return "alg is not ES256" }
        guard header["kid"] as? String == keyID else { return "wrong kid" }
        guard claims["iss"] as? String == teamID else { return "iss is not the team" }
        guard claims["sub"] as? String == clientID else { return "sub is not the client id" }
        guard claims["aud"] as? String == "https://appleid.apple.com" else { return "wrong aud" }
        guard let iat = claims["iat"] as? Int, let exp = claims["exp"] as? Int else { return "no iat or exp" }
        let now = Int(Date().timeIntervalSince1970)
        guard iat <= now + 60, exp > now else { return "not valid now" }
        guard exp - iat <= 15_777_000 else { return "lives more than six months" }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            signingKey.isValidSignature(signature, for: Array((parts[0] + "." + parts[1]).utf8))
        else { return "signature does not verify" }
        return nil
    }

    static func json(_ object: [String: Any]) -> String {
        Base64URL.encode(Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])))
    }

    static func parseForm(_ body: [UInt8]) -> [String: String] {
        var form: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            form[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return form
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let apple: StandInApple
        var head: HTTPRequestHead?
        var body: [UInt8] = []

        init(apple: StandInApple) { self.apple = apple }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body = []
            case .body(var buffer): body += buffer.readBytes(length: buffer.readableBytes) ?? []
            case .end:
                guard let head else { return }
                guard let delay = apple.scriptedDelay(head.uri) else { return respond(head, body, context) }
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                let body = body
                context.eventLoop.scheduleTask(in: .milliseconds(Int64(delay * 1000))) {
                    bound.value.0.respond(head, body, bound.value.1)
                }
            }
        }

        private func respond(_ head: HTTPRequestHead, _ body: [UInt8], _ context: ChannelHandlerContext) {
            let (status, bytes) = apple.answer(
                path: head.uri,
                contentType: head.headers.first(name: "Content-Type"),
                body: body
            )
            var headers = HTTPHeaders([("Content-Length", "\(bytes.count)")])
            if !bytes.isEmpty { headers.add(name: "Content-Type", value: "application/json") }
            context.write(
                wrapOutboundOut(
                    .head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))
                ),
                promise: nil
            )
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: bytes)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
