import Benchmark
import EscrowCore
import EscrowCrypto
import EscrowSQLite
import Foundation
import ProfileEscrow

/// The pieces of capture and replay-open, one at a time: what bounds each path.
func componentBenchmarks() {
    let config = configuration(iterations: 5_000, seconds: 3)
    let keyring = Keyring.generate()
    let profile = try! Fixtures.profile(1)
    let plaintext = EscrowPlaintext(profile: profile, verified: false, capturedAt: Date()).encoded()
    let index = keyring.blindIndex(userIdentifier: profile.userIdentifier)
    let sealed = try! keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index)

    Benchmark("Component: SecretBytes(count: 256) alloc+free", configuration: config) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(SecretBytes(count: 256)) }
    }
    Benchmark("Component: Profile validation", configuration: config) { benchmark in
        for number in benchmark.scaledIterations { blackHole(try Fixtures.profile(number)) }
    }
    Benchmark("Component: plaintext encode", configuration: config) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(EscrowPlaintext(profile: profile, verified: false, capturedAt: Date()).encoded())
        }
    }
    Benchmark("Component: keyring.seal", configuration: config) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try keyring.seal(plaintext: plaintext, id: .random(), blindIndex: index))
        }
    }
    Benchmark("Component: keyring.open", configuration: config) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try keyring.open(sealed)) }
    }
    Benchmark("Component: plaintext decode + validation", configuration: config) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try EscrowPlaintext.decode(plaintext)) }
    }
    let store = Box<SQLiteEscrowStore>()
    Benchmark("Component: store.record(blindIndex:)", configuration: config) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try await store.value!.record(blindIndex: index)) }
    } setup: {
        let escrow = try Fixtures.escrow(path: Fixtures.temporaryDirectory() + "/escrow.sqlite", keyring: keyring)
        _ = try await escrow.capture(profile)
        store.value = escrow.store as? SQLiteEscrowStore
    } teardown: {
        store.value = nil
    }
}
