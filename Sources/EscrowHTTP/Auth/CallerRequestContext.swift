public import EscrowCore
public import Hummingbird
import NIOConcurrencyHelpers
import NIOCore

/// Who called: the bearer token's name and scopes (never the token), as ``BearerAuthentication`` found them.
public struct Caller: Sendable, Hashable {
    public let name: String
    public let scopes: Set<AccessTokenScope>

    public init(name: String, scopes: Set<AccessTokenScope>) {
        self.name = name
        self.scopes = scopes
    }
}

/// A request context that carries its caller, as hummingbird-auth's `AuthRequestContext` carries an identity: filled
/// by ``BearerAuthentication`` on the token-guarded route groups, checked by ``RequireScope``, read by the handlers (the
/// audit actor) and by the access log.
///
/// The caller is held by reference (``CallerSlot``), shared by every copy of one request's context: Hummingbird passes
/// the context down the middleware by value, and the access log, outside the route groups, reads what the
/// authentication inside them found.
public protocol CallerRequestContext: RequestContext {
    /// This request's caller slot; empty until a route group's ``BearerAuthentication`` fills it.
    var callerSlot: CallerSlot { get }
}

extension CallerRequestContext {
    /// The authenticated caller, nil on a route without a token.
    public var caller: Caller? { callerSlot.caller }

    /// The authenticated caller; `401` when none (a route outside every token-guarded group).
    public func requireCaller() throws -> Caller {
        guard let caller else { throw Problem.unauthorized() }
        return caller
    }
}

/// One request's caller, written once by ``BearerAuthentication``.
public final class CallerSlot: Sendable {
    private let value = NIOLockedValueBox<Caller?>(nil)

    public init() {}

    public var caller: Caller? { value.withLockedValue { $0 } }

    func fill(_ caller: Caller) { value.withLockedValue { $0 = caller } }
}

/// The token-guarded routes of ``EscrowRouteCollection`` mounted in an application whose context carries no caller:
/// its context with a caller slot, and its peer address when it has one (for the per-client limits).
struct CallerChildContext<ParentContext: RequestContext>: ChildRequestContext, CallerRequestContext,
    RemoteAddressRequestContext
{
    var coreContext: CoreRequestContextStorage
    let callerSlot = CallerSlot()
    let remoteAddress: SocketAddress?

    init(context: ParentContext) {
        coreContext = context.coreContext
        remoteAddress = (context as? any RemoteAddressRequestContext)?.remoteAddress
    }
}
