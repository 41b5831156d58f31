import ArgumentParser
import EscrowCore
import EscrowHTTP
import EscrowSQLite
import Foundation

/// `profile-escrow tokens add|list|revoke`: the HTTP API's bearer tokens, stored hashed in the token
/// file (`--tokens`), never in the database: these commands work while `serve` runs, and `serve` sees
/// a change at its next request.
struct Tokens: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the HTTP API's bearer tokens: add (shown once), list, revoke.",
        subcommands: [Add.self, List.self, Revoke.self]
    )

    static func validateName(_ name: String) throws {
        guard AccessTokenRecord.isValidName(name) else {
            throw ValidationError("name: must be 1-64 characters of [A-Za-z0-9._-]")
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a token; prints it once (only its hash is stored)."
        )
        @OptionGroup var options: GlobalOptions
        @OptionGroup var tokenStore: TokenStoreOptions
        @Argument(help: "Token name, [A-Za-z0-9._-]{1,64}; the audit actor is http:<name>.") var name: String
        @Option(
            name: .customLong("scope"),
            parsing: .upToNextOption,
            help: "One or more of: capture, read, replay, confirm, erase, metrics, signin."
        )
        var scopes: [String] = []

        func validate() throws {
            try Tokens.validateName(name)
            guard !scopes.isEmpty else { throw ValidationError("give at least one --scope") }
            for scope in scopes where AccessTokenScope(rawValue: scope) == nil {
                throw ValidationError(
                    "--scope: '\(scope)' is not one of \(AccessTokenScope.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
        }

        func run() async throws {
            let store = try await tokenStore.open(options).store
            let token: String
            do {
                token = try await AccessTokens.issue(
                    name: name,
                    scopes: Set(scopes.compactMap(AccessTokenScope.init(rawValue:))),
                    store: store
                )
            } catch let error as EscrowStoreError where error.code == .tokenExists {
                throw ValidationError("a token named \(name) is active; revoke it first or choose another name")
            }
            print(token)
            FileHandle.standardError.write(
                Data("token \(name) added; it is shown only now: store it in your secret manager\n".utf8)
            )
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List tokens (names and scopes, never tokens).")
        @OptionGroup var options: GlobalOptions
        @OptionGroup var tokenStore: TokenStoreOptions

        func run() async throws {
            // Listing creates nothing: no token file yet is no token.
            let tokens = tokenStore.exists(options) ? try await tokenStore.open(options).store.tokens() : []
            if tokens.isEmpty { print("no tokens") }
            for token in tokens {
                let status = token.revokedAt.map { "revoked \(Timestamp.seconds($0))" } ?? "active"
                let scopes = token.scopes.sorted().map(\.rawValue).joined(separator: ",")
                print(
                    "\(token.name.padding(toLength: 24, withPad: " ", startingAt: 0)) created \(Timestamp.seconds(token.createdAt))  \(status)  \(scopes)"
                )
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a token: it answers 401 from now on.")
        @OptionGroup var options: GlobalOptions
        @OptionGroup var tokenStore: TokenStoreOptions
        @Argument(help: "Token name.") var name: String

        func validate() throws { try Tokens.validateName(name) }

        func run() async throws {
            let store = try await tokenStore.open(options).store
            guard try await store.revokeToken(name: name, at: Date()) else {
                throw NothingHeld("no active token with this name")
            }
            print("revoked \(name)")
        }
    }
}
