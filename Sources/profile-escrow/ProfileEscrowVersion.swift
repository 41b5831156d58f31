/// `profile-escrow --version`.
enum ProfileEscrowVersion {
    static let current = "0.14.0-dev"
}
