#if canImport(Security)
public import Foundation
import Security

/// A ``CredentialStore`` in the Keychain: generic passwords of one service, readable only after the device's first
/// unlock (so that a resume at launch works in the background) and only on this device (never in a backup or on a
/// new phone).
@available(iOS 13, macOS 10.15, tvOS 13, watchOS 6, visionOS 1, *)
public struct KeychainCredentialStore: CredentialStore {
    /// The items' `kSecAttrService`.
    public var service: String
    /// A Keychain access group shared with an app extension; nil for the app's own.
    public var accessGroup: String?

    public init(service: String = "ProfileEscrowClient", accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    public func save(_ item: Data, as name: String) throws {
        let attributes: [String: Any] = [
            kSecValueData as String: item,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]
        var status = SecItemUpdate(query(name) as CFDictionary, attributes as CFDictionary)
        if status == errSecItemNotFound {
            status = SecItemAdd(query(name).merging(attributes) { $1 } as CFDictionary, nil)
        }
        guard status == errSecSuccess else { throw CredentialStoreError("save an item", status: status) }
    }

    public func load(_ name: String) throws -> Data? {
        var query = query(name)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let item = result as? Data else {
            throw CredentialStoreError("read an item", status: status)
        }
        return item
    }

    public func remove(_ name: String) throws {
        let status = SecItemDelete(query(name) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else {
            throw CredentialStoreError("remove an item", status: status)
        }
    }

    public func names() throws -> [String] {
        var query = query(nil)
        query[kSecReturnAttributes as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return [] }
        guard status == errSecSuccess, let items = result as? [[String: Any]] else {
            throw CredentialStoreError("list its items", status: status)
        }
        return items.compactMap { $0[kSecAttrAccount as String] as? String }.sorted()
    }

    /// The item `name` of this service (every item of it for nil), in the data-protection Keychain on macOS too.
    private func query(_ name: String?) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecUseDataProtectionKeychain as String: true,
        ]
        if let name { query[kSecAttrAccount as String] = name }
        if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
        return query
    }
}
#endif
