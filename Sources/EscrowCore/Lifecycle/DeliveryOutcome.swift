/// What happened to a delivery, as the replay worker classifies the backend's answer.
public enum DeliveryOutcome: Sendable, Equatable {
    /// `200`, `201`, `204` or `409` (already registered).
    case confirmed(status: Int)
    /// `202`: wait for a confirm call.
    case accepted(status: Int)
    /// Any other answer, a reset or a refused connection (`status` nil): try again later, after
    /// `retryAfter` seconds when the backend said so.
    case retry(status: Int?, retryAfter: Double?)
    /// No complete answer within the delivery deadline. The backend may still be working on the
    /// request, so the next attempt waits at least `deadline` seconds.
    case timedOut(deadline: Double)
    /// `400`, `410` or `422`: the backend says this profile can never be registered.
    case rejected(status: Int)

    /// The audit `detail` of a `delivery-attempted` event.
    public var auditName: String {
        switch self {
        case .confirmed: "confirmed"
        case .accepted: "accepted"
        case .retry, .timedOut: "retry"
        case .rejected: "rejected"
        }
    }

    public var status: Int? {
        switch self {
        case .confirmed(let status), .accepted(let status), .rejected(let status): status
        case .retry(let status, _): status
        case .timedOut: nil
        }
    }

    /// Classifies an HTTP status code. Giving up loses the profile for good, so only the backend's
    /// explicit word gives up early: `400`, `410` and `422`. `401` and `403` (a webhook secret or
    /// configuration mismatch, e.g. during a secret rotation), `404`, `408`, `425`, `429`, `5xx` and
    /// `3xx` (redirects are not followed) are retried.
    public static func classify(status: Int, retryAfter: Double?) -> DeliveryOutcome {
        switch status {
        case 200, 201, 204, 409: .confirmed(status: status)
        case 202: .accepted(status: status)
        case 400, 410, 422: .rejected(status: status)
        default: .retry(status: status, retryAfter: retryAfter)
        }
    }
}
