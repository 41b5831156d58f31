public import Hummingbird
public import NIOCore

/// The request context of `serve`'s listeners: Hummingbird's basic one, plus the caller a token-guarded route group
/// authenticated (``CallerRequestContext``) and the connection's peer address, which the token-less routes' per-client
/// rate limits read (``ClientRateLimiter``). Routes mounted in another application read it from any context that
/// conforms to `RemoteAddressRequestContext`; without one, all clients share one bucket.
public struct EscrowRequestContext: RequestContext, RemoteAddressRequestContext, CallerRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    public let callerSlot = CallerSlot()

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
