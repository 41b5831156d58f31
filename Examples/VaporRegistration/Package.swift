// swift-tools-version:6.2
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its folder (`ProfileEscrow`, `main`, a worktree's name…): ask the folder.
let profileEscrow = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("../..").standardizedFileURL.lastPathComponent

// A Vapor application that captures the Sign in with Apple profile before registering the user and confirms
// after. Built by build.sh, not by the main package's tests (Vapor is heavy).
let package = Package(
    name: "VaporRegistration",
    dependencies: [
        .package(path: "../.."),
        .package(url: "https://github.com/vapor/vapor", from: "4.110.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "VaporRegistration",
            dependencies: [
                .product(name: "ProfileEscrow", package: profileEscrow),
                .product(name: "EscrowCore", package: profileEscrow),
                .product(name: "EscrowCrypto", package: profileEscrow),
                .product(name: "EscrowSQLite", package: profileEscrow),
                .product(name: "Vapor", package: "vapor"),
                .product(name: "Logging", package: "swift-log"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
