import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers

/// The methods each path of a router answers, read from its routes as registered (Hummingbird's `Router.routes`) once
/// they all are: the `Allow` header of a `405` for a path that exists but not for the request's method. Nothing is
/// kept by hand, so routes mounted anywhere answer right.
///
/// Hummingbird answers such a request `404` (its router finds no responder); ``ProblemMiddleware`` asks this table
/// whether the path is a route's. The path is matched as the router matches it: a literal segment before a capture,
/// a capture before a wildcard, so `/v1/admin/escrows/requeue` is the bulk requeue's (POST), not an escrow's.
final class AllowedMethods: Sendable {
    private enum Segment: Comparable {
        /// In the order the router prefers them when several match.
        case rest
        case any
        case literal(Substring)

        func matches(_ segment: Substring) -> Bool {
            switch self {
            case .rest, .any: true
            case .literal(let text): text == segment
            }
        }

        static func < (lhs: Segment, rhs: Segment) -> Bool { lhs.rank < rhs.rank }

        private var rank: Int {
            switch self {
            case .rest: 0
            case .any: 1
            case .literal: 2
            }
        }
    }

    private struct Route {
        let segments: [Segment]
        var methods: Set<HTTPRequest.Method>

        func matches(_ path: [Substring]) -> Bool {
            if segments.last == .rest {
                guard path.count >= segments.count - 1 else { return false }
            } else {
                guard path.count == segments.count else { return false }
            }
            return zip(segments, path).allSatisfy { $0.matches($1) }
        }
    }

    private let routes = NIOLockedValueBox<[Route]>([])

    /// Reads `router`'s routes: call it once every route is registered. A `GET` route answers `HEAD` too (the router
    /// generates them).
    func load<Context>(_ router: Router<Context>) {
        var byPath: [String: Route] = [:]
        for route in router.routes {
            let key = route.path.description
            var entry =
                byPath[key]
                ?? Route(segments: route.path.components.map { Self.segment($0.description) }, methods: [])
            entry.methods.insert(route.method)
            if route.method == .get { entry.methods.insert(.head) }
            byPath[key] = entry
        }
        routes.withLockedValue { $0 = Array(byPath.values) }
    }

    /// The methods the route of `path` answers, sorted; nil when no route has that path.
    func methods(path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        let matching = routes.withLockedValue { routes in routes.filter { $0.matches(segments) } }
        // The router's choice: the most specific segments first.
        guard let best = matching.max(by: { $0.segments.lexicographicallyPrecedes($1.segments) }) else { return nil }
        return best.methods.sorted { $0.rawValue < $1.rawValue }
    }

    /// A router path component, by its text: `**` the rest of the path, a capture or wildcard (`{name}`, `:name`, `*`,
    /// `*.jpg`) any one segment, anything else itself.
    private static func segment(_ text: String) -> Segment {
        if text == "**" { return .rest }
        if text.contains("{") || text.contains("*") || text.hasPrefix(":") { return .any }
        return .literal(Substring(text))
    }
}
