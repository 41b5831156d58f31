public import EscrowCore
import EscrowCrypto
import Foundation
import Tracing

extension OperatorActions {
    /// What a test delivery found: the backend's status (nil without an answer), how long the exchange took, how a
    /// real delivery answered so would be classified, and why there was no answer. Never the backend's body.
    public struct TestDelivery: Sendable, Equatable {
        /// Why a test delivery had no answer.
        public enum Failure: String, Sendable, Equatable {
            /// No answer within the delivery timeout.
            case timeout
            /// Nothing listens at the backend's address and port.
            case connectionRefused = "connection_refused"
            /// Any other failure to connect: the name does not resolve, no route.
            case cannotConnect = "cannot_connect"
            /// The TLS handshake failed: the certificate, its name, the client certificate.
            case tls
            /// The connection was closed or lost, or the answer was not HTTP/1.1.
            case noAnswer = "no_answer"
        }

        /// The backend's HTTP status; nil when it did not answer.
        public var status: Int?
        public var milliseconds: Double
        /// What a real delivery answered so would become: `confirmed`, `accepted`, `rejected` or `retry`.
        public var outcome: String
        public var failure: Failure?

        /// Whether the backend answered with a 2xx status.
        public var succeeded: Bool { status.map { (200..<300).contains($0) } ?? false }
    }

    /// The test delivery's body: marked as a test, with no escrow and no personal data.
    static func testDeliveryBody(id: String, timestamp: Int64) -> [UInt8] {
        Array(#"{"type":"test-delivery","webhookId":"\#(id)","sentAt":\#(timestamp)}"#.utf8)
    }

    /// Sends one harmless request to the backend, exactly as a real delivery is sent (the same headers, Standard
    /// Webhooks signature with every webhook secret, TLS and timeout) but with a body that says it is a test
    /// (`{"type":"test-delivery", …}`) and a `webhook-id` beginning `test-`, so an operator can check the backend's
    /// URL, secret and TLS before escrows flow. Touches no escrow, counts as no delivery, and is not audited: it
    /// changes nothing. `actor` is who asked, for the trace. A process without a backend refuses it
    /// (``EscrowError/Code/noBackend``).
    public func testDelivery(actor: AuditActor) async throws -> TestDelivery {
        guard let backend else {
            throw EscrowError(
                .noBackend,
                "this process has no backend to deliver to: run the test on a node with a worker"
            )
        }
        let now = escrow.configuration.clock.now()
        let id = "test-" + EscrowID.random().hex
        let body = Self.testDeliveryBody(id: id, timestamp: Int64(now.timeIntervalSince1970.rounded(.down)))
        let started = ContinuousClock.now
        let answer = try await BackendClient.with(backend) { client in
            await EscrowTracing.withSpan(escrow.configuration.tracer, "escrow.test-delivery") { span in
                span?.attributes["escrow.actor"] = actor.rawValue
                return await client.deliver(
                    body: body,
                    escrowID: id,
                    within: backend.deliveryTimeout,
                    now: now,
                    tracer: escrow.configuration.tracer
                )
            }
        }
        let elapsed = ContinuousClock.now - started
        return TestDelivery(
            status: answer.outcome.status,
            milliseconds: (elapsed.inSeconds * 1000).rounded(),
            outcome: answer.outcome.auditName,
            failure: answer.cause.map(Self.classify)
        )
    }

    /// A failure without an answer, as an operator acts on it (classified where it happened: ``BackendClient/Failure``).
    static func classify(_ failure: BackendClient.Failure) -> TestDelivery.Failure {
        switch failure {
        case .deadline: .timeout
        case .tls: .tls
        case .connect(_, let refused): refused ? .connectionRefused : .cannotConnect
        case .closedBeforeAnswer, .shuttingDown, .connectionLost, .exchange: .noAnswer
        }
    }
}
