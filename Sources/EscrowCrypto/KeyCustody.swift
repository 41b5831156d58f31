/// Where a keyring's master secret keys are kept: wrapped (AES-256-GCM) under a key that never leaves an external
/// engine. Recorded in the keyring file (`docs/FORMAT.md`), so that later commands need no option to find the
/// engine; the credentials (a Transit token, a PKCS#11 PIN) are never recorded: they come from the environment.
public enum KeyCustody: Sendable, Equatable {
    /// OpenBao or Vault Transit: `POST <url>/v1/<mount>/encrypt/<key>` and `.../decrypt/<key>`.
    case transit(Transit)
    /// A PKCS#11 token (an HSM, SoftHSM2): `CKM_AES_GCM` with a sensitive, non-extractable AES-256 key.
    case pkcs11(PKCS11)

    /// What locates a Transit key.
    public struct Transit: Sendable, Equatable {
        /// The server's base URL, e.g. `https://bao.internal:8200` (no trailing slash).
        public var address: String
        /// The Transit secrets engine's mount path, e.g. `transit`.
        public var mount: String
        /// The name of the Transit key (type `aes256-gcm96`).
        public var key: String
        /// A PEM file of the certificate authorities to trust for `https` (nil: the system's).
        public var caFile: String?

        public init(address: String, mount: String = "transit", key: String, caFile: String? = nil) {
            var address = address
            while address.hasSuffix("/") { address.removeLast() }
            var mount = mount
            while mount.hasPrefix("/") { mount.removeFirst() }
            while mount.hasSuffix("/") { mount.removeLast() }
            self.address = address
            self.mount = mount
            self.key = key
            self.caFile = caFile
        }

        /// The host when ``address`` is plain `http://` to a host that is not loopback (127.0.0.0/8, `::1`,
        /// `localhost`): the token and the wrapped secret keys would cross the network in clear. Such an address is
        /// refused everywhere (``KeyCustody/validate()``, the keyring file's parser, ``TransitCustodian``).
        public var cleartextRemoteHost: String? { LoopbackHost.cleartextRemoteHost(of: address) }

        /// Why ``address`` is refused when it is plain `http` to a host that is not loopback; nil when it is not.
        public var cleartextRefusal: String? {
            cleartextRemoteHost.map { host in
                "the Transit address \(address) is plain http:// to \(host), which is not a loopback address "
                    + "(127.0.0.0/8, ::1, localhost): the token and the wrapped secret keys would cross the network in "
                    + "clear; use https:// (with --transit-ca for a private CA)"
            }
        }
    }

    /// What locates a PKCS#11 key.
    public struct PKCS11: Sendable, Equatable {
        /// The PKCS#11 module (a shared library), loaded at run time, e.g. `/usr/lib/softhsm/libsofthsm2.so`.
        public var module: String
        /// The token's label (`CKA_LABEL` of the token, at most 32 bytes).
        public var token: String
        /// The AES key's label (`CKA_LABEL`).
        public var key: String

        public init(module: String, token: String, key: String) {
            self.module = module
            self.token = token
            self.key = key
        }
    }

    /// `transit` or `pkcs11`: the word of `--custody` and of the file.
    public var kind: String {
        switch self {
        case .transit: "transit"
        case .pkcs11: "pkcs11"
        }
    }

    /// The engine in words for messages and logs, e.g. `transit key "escrow" at https://bao:8200 (mount transit)`.
    /// Locations only: never a credential.
    public var engine: String {
        switch self {
        case .transit(let transit):
            "transit key \"\(transit.key)\" at \(transit.address) (mount \(transit.mount))"
        case .pkcs11(let pkcs11):
            "pkcs11 key \"\(pkcs11.key)\" in token \"\(pkcs11.token)\" (module \(pkcs11.module))"
        }
    }

    /// The fields after `custody` on the file's custody line, each percent-encoded (``encodeField(_:)``).
    var fileFields: [String] {
        switch self {
        case .transit(let transit):
            [
                "transit", Self.encodeField(transit.address), Self.encodeField(transit.mount),
                Self.encodeField(transit.key), transit.caFile.map(Self.encodeField) ?? "-",
            ]
        case .pkcs11(let pkcs11):
            ["pkcs11", Self.encodeField(pkcs11.module), Self.encodeField(pkcs11.token), Self.encodeField(pkcs11.key)]
        }
    }

    /// Checks the values a file can hold: non-empty, and no NUL (every other byte is percent-encoded).
    public func validate() throws(CryptoError) {
        let values: [String]
        switch self {
        case .transit(let transit):
            guard transit.address.hasPrefix("http://") || transit.address.hasPrefix("https://") else {
                throw CryptoError(.keyringRefused, "the Transit address must start with http:// or https://")
            }
            if let refusal = transit.cleartextRefusal { throw CryptoError(.keyringRefused, refusal) }
            values = [transit.address, transit.mount, transit.key] + (transit.caFile.map { [$0] } ?? [])
        case .pkcs11(let pkcs11):
            guard pkcs11.token.utf8.count <= 32 else {
                throw CryptoError(.keyringRefused, "a PKCS#11 token label has at most 32 bytes")
            }
            values = [pkcs11.module, pkcs11.token, pkcs11.key]
        }
        for value in values where value.isEmpty || value.utf8.contains(0) || value == "-" {
            throw CryptoError(.keyringRefused, "a custody location must be non-empty text without NUL and not `-`")
        }
    }

    /// Percent-encodes every byte outside `!`...`~` and `%` itself, so that a field never holds a space.
    static func encodeField(_ value: String) -> String {
        var output = ""
        for byte in value.utf8 {
            if byte > 0x20, byte < 0x7F, byte != UInt8(ascii: "%") {
                output.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                output += "%" + Hex.encode([byte]).uppercased()
            }
        }
        return output
    }

    /// The inverse of ``encodeField(_:)``; nil for a malformed escape or text that is not UTF-8.
    static func decodeField(_ field: [UInt8]) -> String? {
        var bytes: [UInt8] = []
        var index = 0
        while index < field.count {
            let byte = field[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < field.count,
                    let value = UInt8(String(decoding: field[(index + 1)...(index + 2)], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                index += 3
            } else {
                bytes.append(byte)
                index += 1
            }
        }
        guard !bytes.contains(0) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }
}
