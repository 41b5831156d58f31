import AsyncHTTPClient
import EscrowCore
import EscrowCrypto
import EscrowSQLite
import EscrowTestSupport
import Foundation
import Logging
import NIOHTTP1
import ProfileEscrow
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `keys rotate` on a disk whose folder sync fails (scripts/faults/faultshim.c), beside a running `serve` that
/// reloads the keyring and captures, then a power cut: no node ever seals to a master key version whose secret key
/// the power cut takes away, and every escrow opens with the keyring the disk kept.
@Suite("Keyring durability")
struct KeyringDurabilityTests {
    /// `failedSync`: which folder sync of the rotation fails: 1, the one after the new version is written staged
    /// (not active); 2, the one after it is made active.
    @Test(arguments: [1, 2])
    func aRotationWhoseFolderSyncFailsNeverSealsToAKeyAPowerCutTakesAway(failedSync: Int) async throws {
        let scratch = TemporaryDirectory()
        let keys = scratch.path + "/keys"
        let shimFolder = scratch.path + "/shim"
        for folder in [keys, shimFolder] {
            try FileManager.default.createDirectory(
                atPath: folder,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        }
        let environment = [
            "PROFILE_ESCROW_DATABASE": scratch.path + "/escrow.sqlite",
            "PROFILE_ESCROW_KEYRING": keys + "/keyring",
        ]
        let token = try await ProfileEscrowCLI.setUpCaptureNode(
            token: "keyring.durability",
            environment: environment,
            in: scratch.path
        )
        let processes = ProfileEscrowProcesses(directory: scratch.path, environment: environment)
        defer { processes.killAll() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        defer { _ = client.shutdown() }
        let port = try await processes.startHealthyCaptureNode("serve", client: client)
        let serve = try #require(processes.process("serve"))
        #expect(await DiskFaultTests.capture(client, port: port, token: token, number: 0).0 == .created)

        // The rotation, on a disk whose `failedSync`th folder sync fails with EIO.
        let shim = try await FaultShim(directory: keys, scratch: shimFolder)
        try await shim.snapshot()
        let rotate = try await ProfileEscrowCLI.run(
            ["keys", "rotate"],
            environment: environment.merging(shim.environment(fail: "fsync:/:\(failedSync):EIO")) { $1 },
            in: scratch.path
        )
        #expect(rotate.status == 4, "keys rotate: \(rotate.stderr)")
        #expect(
            rotate.stderr.contains(failedSync == 1 ? "Nothing was rotated" : "The rotation is in effect"),
            "\(rotate.stderr)"
        )
        let inFile = try Keyring.load(path: keys + "/keyring")
        #expect(inFile.keys.map(\.version) == [1, 2])
        #expect(inFile.activeVersion == (failedSync == 1 ? 1 : 2))

        // The running node reloads the file and captures: to version 1 while version 2 is only staged.
        kill(serve.processIdentifier, SIGHUP)
        try await eventually("serve reloads the keyring", within: 30, every: .milliseconds(100)) {
            processes.logs.map { ProfileEscrowCLI.text(atPath: $0) }.joined().contains("keyring reloaded")
        }
        #expect(await DiskFaultTests.capture(client, port: port, token: token, number: 1).0 == .created)
        let store = try SQLiteEscrowStore(path: scratch.path + "/escrow.sqlite", logger: Logger(label: "test"))
        defer { try? store.close() }
        #expect(try await store.keyVersionsInUse() == (failedSync == 1 ? [1: 2] : [1: 1, 2: 1]))

        // The power cut: the folder holds what the disk holds.
        processes.signal("serve")
        try await shim.restore()
        let kept = try Keyring.load(path: keys + "/keyring")
        // The staged file is durable when the second sync failed: the new version's secret key survives.
        #expect(kept.keys.map(\.version) == (failedSync == 1 ? [1] : [1, 2]))
        #expect(kept.activeVersion == 1)
        let escrow = Escrow(store: store, keyring: kept, logger: Logger(label: "test"))
        for number in 0...1 {
            let user = "000000.disk\(String(format: "%020d", number)).0002"
            let opened = try await escrow.replay(userIdentifier: user)
            #expect(opened.profile.userIdentifier == user)
        }

        // Run again on a sound disk, it finishes the job.
        let again = try await ProfileEscrowCLI.run(["keys", "rotate"], environment: environment, in: scratch.path)
        #expect(again.status == 0, "keys rotate again: \(again.stderr)")
        let rotated = try Keyring.load(path: keys + "/keyring")
        #expect(rotated.activeVersion == 2 && rotated.keys.map(\.version) == [1, 2])
    }
}
