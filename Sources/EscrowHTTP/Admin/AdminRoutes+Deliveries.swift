import EscrowCore
import Foundation
import Hummingbird
import ProfileEscrow

/// `/v1/admin/deliveries…`: the cluster's delivery switch. Reading it needs `read`; pausing and resuming, each with a
/// reason, `operate`.
extension AdminRoutes {
    func deliveries(_ request: Request) async throws -> Response {
        guard request.uri.queryParameters.isEmpty else {
            throw OperatorActions.InputError(field: nil, "this path takes no parameters")
        }
        return try JSONResponse.make(.ok, encoding: DeliveriesBody(try await actions.deliveries()))
    }

    /// `POST …/pause` (`paused` true) or `…/resume`: body `{"reason"}`; answers the switch after it, with `changed`
    /// false when deliveries already were so.
    func switchDeliveries(
        paused: Bool,
        _ request: Request,
        _ context: some CallerRequestContext
    ) async throws -> Response {
        let caller = try context.requireCaller()
        let reason = try Self.reason(try await readObject(request), allowing: [])
        let actor = AuditActor.http(token: caller.name)
        let change =
            paused
            ? try await actions.pauseDeliveries(reason: reason, actor: actor)
            : try await actions.resumeDeliveries(reason: reason, actor: actor)
        return try JSONResponse.make(.ok, encoding: DeliveriesBody(change.deliveries, changed: change.changed))
    }
}

/// `{paused, pausedAt, pausedBy, reason, ratePerSecond, expiringWhilePaused}`: while paused, when, by whom and why;
/// while running, `pausedAt` and `pausedBy` are null and `resumedAt`, `resumedBy` and `reason` are the last resume's
/// (null when deliveries were never paused). `changed` only in the answer to a pause or resume.
struct DeliveriesBody: Encodable {
    var view: OperatorActions.DeliveriesView
    var changed: Bool?

    init(_ view: OperatorActions.DeliveriesView, changed: Bool? = nil) {
        self.view = view
        self.changed = changed
    }

    enum Keys: String, CodingKey {
        case paused, pausedAt, pausedBy, resumedAt, resumedBy, reason, ratePerSecond, expiringWhilePaused, changed
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        let control = view.control
        let at = control.changedAt.map(Timestamp.milliseconds)
        let by = control.changedBy?.rawValue
        try container.encode(control.paused, forKey: .paused)
        try container.encode(control.paused ? at : nil, forKey: .pausedAt)
        try container.encode(control.paused ? by : nil, forKey: .pausedBy)
        if !control.paused {
            try container.encode(at, forKey: .resumedAt)
            try container.encode(by, forKey: .resumedBy)
        }
        try container.encode(control.reason, forKey: .reason)
        try container.encode(view.ratePerSecond, forKey: .ratePerSecond)
        try container.encode(view.expiringWhilePaused, forKey: .expiringWhilePaused)
        try container.encodeIfPresent(changed, forKey: .changed)
    }
}
