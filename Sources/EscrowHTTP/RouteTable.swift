import Hummingbird

/// The API's paths and their methods, for `405 Method Not Allowed` with an `Allow` header.
enum RouteTable {
    static let routes: [(segments: [String], methods: [HTTPRequest.Method])] = [
        (["v1", "escrows"], [.post]),
        (["v1", "escrows", "*"], [.get, .head, .delete]),
        (["v1", "escrows", "*", "replay"], [.post]),
        (["v1", "escrows", "*", "confirm"], [.post]),
        (["v1", "escrows", "*", "requeue"], [.post]),
        (["v1", "apple", "notifications"], [.post]),
        (["v1", "apple", "signin"], [.get, .head]),
        (["v1", "apple", "signin", "callback"], [.post]),
        (["v1", "apple", "signin", "tickets", "redeem"], [.post]),
        (["v1", "admin", "overview"], [.get, .head]),
        (["v1", "admin", "escrows"], [.get, .head]),
        (["v1", "admin", "escrows", "requeue"], [.post]),
        (["v1", "admin", "escrows", "*"], [.get, .head, .delete]),
        (["v1", "admin", "escrows", "*", "requeue"], [.post]),
        (["v1", "admin", "purge-report"], [.get, .head]),
        (["v1", "admin", "lookup"], [.post]),
        (["healthz"], [.get, .head]),
        (["readyz"], [.get, .head]),
        (["metrics"], [.get, .head]),
    ]

    static func allowedMethods(path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        for route in routes where route.segments.count == segments.count {
            let matches = zip(route.segments, segments).allSatisfy { pattern, segment in
                pattern == "*" || pattern == segment
            }
            if matches { return route.methods }
        }
        return nil
    }
}
