import EscrowCrypto

/// The keyring file parser: any bytes are a keyring or a `CryptoError`, never a crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzKeyringFile(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let buffer = UnsafeRawBufferPointer(start: data, count: count)
    if let keyring = try? KeyringFileParser(buffer: buffer, path: "fuzz.keyring").parse() {
        _ = keyring.keys.count
    }
    return 0
}
