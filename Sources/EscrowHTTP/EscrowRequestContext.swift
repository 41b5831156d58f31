public import Hummingbird
public import NIOCore

/// The request context of `serve`'s listeners: Hummingbird's basic one, plus the connection's peer address, which the
/// token-less routes' per-client rate limits read (``ClientRateLimiter``). Routes mounted in another application read
/// it from any context that conforms to `RemoteAddressRequestContext`; without one, all clients share one bucket.
public struct EscrowRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
