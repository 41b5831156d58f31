import Foundation
import HTTPTypes
import Hummingbird
import Mustache

/// The service's pages (the console, web sign-in's, the purge report): Mustache templates with HTML escaping, the one
/// stylesheet and the 503 page's script, read once from the `Pages` folder of the module's resource bundle.
///
/// The bundle is found here rather than through `Bundle.module`, whose generated accessor stops the process when the
/// bundle is not where the build left it: beside the executable first (an installed binary carries its
/// `ProfileEscrow_EscrowHTTP.resources` folder beside it), then the module's source folder (a build tree). Missing,
/// ``load()`` throws an error naming the folder it looked for; `serve` calls it before listening.
public struct PageTemplates: Sendable {
    /// The resource bundle SwiftPM builds for this module, and the folder in it.
    public static let bundleName = "ProfileEscrow_EscrowHTTP.resources"
    static let folderName = "Pages"

    let library: MustacheLibrary
    /// `console.css`: every page's classes, the charts' palette included.
    let stylesheet: String
    /// `resubmit.js`: the 503 sign-in page posts its form again with it.
    let resubmitScript: String

    /// The templates of this process, read at the first use; ``load()`` reads them at startup instead.
    static let shared = Result { try PageTemplates(folder: locate()) }

    /// The templates, read once per process; throws ``Missing`` when the folder is not found or lacks a file.
    @discardableResult
    public static func load() throws -> PageTemplates { try shared.get() }

    init(folder: URL) throws {
        func read(_ name: String) throws -> String {
            let file = folder.appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: file.path) else {
                throw Missing(looked: [file.path])
            }
            return String(decoding: data, as: UTF8.self)
        }
        var library = MustacheLibrary()
        for name in Self.templateNames { try library.register(read(name + ".mustache"), named: name) }
        self.library = library
        self.stylesheet = try read("console.css")
        self.resubmitScript = try read("resubmit.js")
    }

    /// Every template, by the name the others include it under.
    static let templateNames = [
        "document", "chart", "cards", "csrf", "console", "console-signin", "console-overview", "console-escrows",
        "console-escrow",
        "console-keys", "console-tokens", "console-message", "purge-report", "signin-message", "signin-retry",
        "console-test-delivery", "console-notifications",
    ]

    /// Renders `data` (a plain struct, read by property name) with the template `name`, escaping every `{{value}}`.
    func render(_ name: String, _ data: Any) -> String {
        guard let html = library.render(data, withTemplate: name) else {
            preconditionFailure("no page template named \(name)")
        }
        return html
    }

    /// An answer made by `make` from the templates, with `headers` and the content `type`; a `500` naming the missing
    /// folder when the templates are not installed (`serve` loads them before listening, so only a router built
    /// without ``load()`` meets it).
    static func response(
        _ status: HTTPResponse.Status,
        headers: HTTPFields,
        type: String,
        _ make: (PageTemplates) -> String
    ) -> Response {
        var headers = headers
        switch shared {
        case .success(let templates):
            headers[.contentType] = type
            return Response(
                status: status,
                headers: headers,
                body: .init(byteBuffer: ByteBuffer(string: make(templates)))
            )
        case .failure(let error):
            headers[.contentType] = "text/plain; charset=utf-8"
            let body = ByteBuffer(string: "\(error)\n")
            return Response(status: .internalServerError, headers: headers, body: .init(byteBuffer: body))
        }
    }

    /// The `Pages` folder: beside the executable, else in this module's source folder.
    static func locate() throws -> URL {
        var candidates: [URL] = []
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            candidates.append(
                executable.deletingLastPathComponent().appendingPathComponent(bundleName)
                    .appendingPathComponent(folderName)
            )
        }
        // This file is in the module's Rendering/ folder; Pages/ is beside that folder.
        candidates.append(
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent(folderName)
        )
        let found = candidates.first { folder in
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: folder.path, isDirectory: &isFolder) && isFolder.boolValue
        }
        guard let found else { throw Missing(looked: candidates.map(\.path)) }
        return found
    }

    /// The pages' folder, or a file in it, is not where it was looked for.
    public struct Missing: Error, CustomStringConvertible {
        public let looked: [String]

        public var description: String {
            "the page templates are missing (looked for \(looked.joined(separator: " and "))): install the "
                + "\(PageTemplates.bundleName) folder beside the profile-escrow binary"
        }
    }
}
