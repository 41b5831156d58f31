import EscrowHTTP
import Foundation

/// Apple notification parsing: the `events` claim's JSON, and the JWS header and payload check made
/// before any signature is verified (`kid`, `alg`, strict JSON). None may crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAppleNotification(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: count), as: UTF8.self)
    _ = AppleNotificationEvent(json: text)
    _ = AppleToken(text).map(Keys.jwks.accepts)
    return 0
}

enum Keys {
    /// A JWKS with one fake EC key (the P-256 generator point as its public key).
    static let jwks: AppleJWKS = {
        let json = #"""
            {"keys":[{"kty":"EC","kid":"fuzz-ec","alg":"ES256","use":"sig","crv":"P-256",
            "x":"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY","y":"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}]}
            """#
        let box = Box()
        let semaphore = DispatchSemaphore(value: 0)
        Task {
            box.value = try? await AppleJWKS(json: Array(json.utf8))
            semaphore.signal()
        }
        semaphore.wait()
        return box.value!
    }()

    final class Box: @unchecked Sendable {
        var value: AppleJWKS?
    }
}
