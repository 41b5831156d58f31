import Benchmark
import EscrowCrypto
import EscrowCustody
import Foundation
import ProfileEscrow

// Capture and replay with a plain keyring and with a keyring in custody, in the same run: custody costs one engine
// call per master key version when a keyring is loaded (at start and at each reload), nothing per escrow.
// The engine comes from the variables scripts/softhsm.sh or scripts/openbao.sh print (scripts/custody-benchmark.sh
// starts both); without one, only the plain benchmarks run.

/// The custody engine of this run, with its credential's environment; nil without one.
private func benchmarkEngine() -> (KeyCustody, [String: String])? {
    let environment = ProcessInfo.processInfo.environment
    if let module = environment["PROFILE_ESCROW_TEST_PKCS11_MODULE"],
        let token = environment["PROFILE_ESCROW_TEST_PKCS11_TOKEN"],
        let pin = environment["PROFILE_ESCROW_TEST_PKCS11_PIN"]
    {
        return (
            .pkcs11(KeyCustody.PKCS11(module: module, token: token, key: "benchmark")),
            ["PROFILE_ESCROW_PKCS11_PIN": pin]
        )
    }
    if let address = environment["PROFILE_ESCROW_TEST_BAO_ADDR"],
        let token = environment["PROFILE_ESCROW_TEST_BAO_TOKEN"],
        let key = environment["PROFILE_ESCROW_TEST_BAO_KEY"]
    {
        return (.transit(KeyCustody.Transit(address: address, key: key)), ["PROFILE_ESCROW_TRANSIT_TOKEN": token])
    }
    return nil
}

/// A keyring file in `directory`, plain or in custody, loaded as a starting process loads it.
private func loadedKeyring(custody: Bool, directory: String) async throws -> Keyring {
    let path = directory + "/keyring"
    var keyring = Keyring.generate()
    var environment: [String: String] = [:]
    if custody, let (location, credential) = benchmarkEngine() {
        environment = credential
        let custodian = KeyringCustody.custodian(for: location, environment: credential, mayCreateKey: true)
        keyring = try await keyring.wrapped(into: location, by: custodian)
    }
    try keyring.write(path: path, overwrite: false)
    return try await KeyringCustody.load(path: path, environment: environment)
}

func custodyBenchmarks() {
    let kinds = benchmarkEngine() == nil ? ["plain"] : ["plain", "custody"]
    let held = 2_000
    for kind in kinds {
        let capture = Box<Escrow>()
        Benchmark("Custody: capture, one at a time (\(kind) keyring)", configuration: configuration()) { benchmark in
            for _ in benchmark.scaledIterations {
                capture.counter += 1
                blackHole(try await capture.value!.capture(try Fixtures.profile(capture.counter)))
            }
        } setup: {
            let directory = Fixtures.temporaryDirectory()
            let keyring = try await loadedKeyring(custody: kind == "custody", directory: directory)
            capture.value = try Fixtures.escrow(path: directory + "/escrow.sqlite", keyring: keyring)
        } teardown: {
            capture.value = nil
        }

        let replay = Box<Escrow>()
        Benchmark("Custody: replay-open (\(kind) keyring)", configuration: configuration()) { benchmark in
            for _ in benchmark.scaledIterations {
                replay.counter += 1
                blackHole(
                    try await replay.value!.replay(userIdentifier: Fixtures.userIdentifier(replay.counter % held))
                )
            }
        } setup: {
            let directory = Fixtures.temporaryDirectory()
            let keyring = try await loadedKeyring(custody: kind == "custody", directory: directory)
            let escrow = try Fixtures.escrow(path: directory + "/escrow.sqlite", keyring: keyring)
            for number in 0..<held { _ = try await escrow.capture(try Fixtures.profile(number)) }
            replay.value = escrow
        } teardown: {
            replay.value = nil
        }
    }

    // What custody does cost: loading (unwrapping) the keyring, once per start and per reload.
    guard let (location, credential) = benchmarkEngine() else { return }
    let path = Box<String>()
    Benchmark(
        "Custody: load and unwrap a 1-version keyring (\(location.kind)), per start or reload",
        configuration: configuration(iterations: 200)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try await KeyringCustody.load(path: path.value!, environment: credential))
        }
    } setup: {
        let file = Fixtures.temporaryDirectory() + "/keyring"
        let custodian = KeyringCustody.custodian(for: location, environment: credential, mayCreateKey: true)
        try await Keyring.generate().wrapped(into: location, by: custodian).write(path: file, overwrite: false)
        path.value = file
    }
}
