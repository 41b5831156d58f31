import EscrowCore
import Hummingbird
import ProfileEscrow

extension ConsoleRoutes {
    /// `console-test-delivery`'s values: a line that says how it went, and cards for the status, the time and the
    /// outcome.
    struct TestDeliveryPage {
        var kind: String
        var summary: String
        var cards: [Card]

        init(_ result: OperatorActions.TestDelivery) {
            let status = result.status.map(String.init) ?? "none"
            let time = "\(Int(result.milliseconds)) ms"
            if result.succeeded {
                kind = "ok"
                summary = "The backend answered \(status) in \(time): real deliveries would reach it."
            } else if let failure = result.failure {
                kind = "error"
                summary = "No answer from the backend (\(failure.rawValue)) after \(time)."
            } else {
                kind = "error"
                summary = "The backend answered \(status) in \(time): check its URL and webhook secret."
            }
            cards = [
                Card(label: "Status", value: status, kind: result.succeeded ? "ok" : "bad", id: "test-status"),
                Card(label: "Time", value: time, id: "test-time"),
                Card(label: "Outcome", value: result.outcome, id: "test-outcome"),
            ]
            if let failure = result.failure {
                cards.append(Card(label: "Error", value: failure.rawValue, kind: "bad", id: "test-error"))
            }
        }
    }

    /// `POST /console/deliveries/test` (`operate`): one test delivery through ``OperatorActions/testDelivery(actor:)``,
    /// as the admin API and `replay --test` send it; its answer on a page.
    func testDelivery(_ viewer: ConsolePages.Viewer) async throws -> Response {
        let result = try await actions.testDelivery(actor: .console(token: viewer.name))
        return ConsolePages.render(
            "console-test-delivery",
            title: "Test delivery",
            viewer: viewer,
            TestDeliveryPage(result)
        )
    }
}
