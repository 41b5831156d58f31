/// One escrow as stored: everything a row holds besides its metadata (states, times, attempts).
///
/// The byte layout of each field, and of the MAC input, is in `docs/FORMAT.md`. None of it is secret in the sense
/// of a key: without the keyring's secret key for ``keyVersion`` nothing here opens.
public struct SealedEscrow: Sendable, Equatable {
    /// The escrow's random id, bound into both sealed plaintexts and the MAC.
    public var id: EscrowID
    /// The user's blind index, bound into both sealed plaintexts and the MAC.
    public var blindIndex: BlindIndex
    /// The master key version that ``sealedKey`` is sealed to.
    public var keyVersion: UInt32
    /// The escrow's own X25519 public key (32 bytes).
    public var publicKey: [UInt8]
    /// `crypto_box_seal` of the padded profile plaintext to ``publicKey``.
    public var sealedProfile: [UInt8]
    /// `crypto_box_seal` of the escrow's secret key to the master public key of ``keyVersion``.
    public var sealedKey: [UInt8]
    /// `crypto_auth` (HMAC-SHA-512-256, keyed with the row key) over all the fields above (32 bytes).
    public var mac: [UInt8]
    /// The profile box's key, sealed under a key derived from the key box's: lets an opener skip one X25519
    /// multiplication (``Keyring/open(_:)``). Empty for an escrow sealed without it; outside the MAC, and never needed.
    public var profileBoxKey: [UInt8]

    /// Rebuilds a row read from storage; nothing is checked until ``Keyring/verify(_:)`` or ``Keyring/open(_:)``.
    public init(
        id: EscrowID,
        blindIndex: BlindIndex,
        keyVersion: UInt32,
        publicKey: [UInt8],
        sealedProfile: [UInt8],
        sealedKey: [UInt8],
        mac: [UInt8],
        profileBoxKey: [UInt8] = []
    ) {
        self.id = id
        self.blindIndex = blindIndex
        self.keyVersion = keyVersion
        self.publicKey = publicKey
        self.sealedProfile = sealedProfile
        self.sealedKey = sealedKey
        self.mac = mac
        self.profileBoxKey = profileBoxKey
    }
}
