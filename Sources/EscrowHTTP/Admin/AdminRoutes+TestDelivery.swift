import EscrowCore
import Foundation
import Hummingbird
import ProfileEscrow

/// `POST /v1/admin/test-delivery` (`operate`): one signed request to the backend with no escrow in it, its answer
/// shown. A node without a worker answers 409 `no_backend`.
extension AdminRoutes {
    func testDelivery(_ request: Request, _ context: some CallerRequestContext) async throws -> Response {
        let caller = try context.requireCaller()
        guard request.uri.queryParameters.isEmpty else {
            throw OperatorActions.InputError(field: nil, "this path takes no parameters")
        }
        let result = try await actions.testDelivery(actor: .http(token: caller.name))
        return try JSONResponse.make(.ok, encoding: TestDeliveryBody(result))
    }
}

/// `{status, milliseconds, outcome, error}`: the backend's status (null without an answer), how long the exchange
/// took, what a real delivery answered so would become, and why there was no answer (null when there was one).
struct TestDeliveryBody: Encodable {
    var status: Int?
    var milliseconds: Double
    var outcome: String
    var error: String?

    init(_ result: OperatorActions.TestDelivery) {
        status = result.status
        milliseconds = result.milliseconds
        outcome = result.outcome
        error = result.failure?.rawValue
    }

    enum CodingKeys: String, CodingKey { case status, milliseconds, outcome, error }

    /// Every member, null ones too.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(status, forKey: .status)
        try container.encode(milliseconds, forKey: .milliseconds)
        try container.encode(outcome, forKey: .outcome)
        try container.encode(error, forKey: .error)
    }
}
