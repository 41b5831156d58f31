import EscrowCore
import Hummingbird
import ProfileEscrow

extension ConsoleRoutes {
    /// `console-notifications`' values: counts over the overview's window and the last notifications, each by type,
    /// outcome and time only.
    struct NotificationsPage {
        struct Count {
            var type: String
            var outcome: String
            var count: Int
        }

        struct Event {
            var at: String
            var type: String
            var outcome: String
        }

        var counts: [Count]
        var events: [Event]
        var limit: Int
        // Stored, not computed: the templates read properties by reflection.
        var hasCounts: Bool
        var hasEvents: Bool

        init(counts: [Count], events: [Event], limit: Int) {
            self.counts = counts
            self.events = events
            self.limit = limit
            hasCounts = !counts.isEmpty
            hasEvents = !events.isEmpty
        }
    }

    /// `GET /console/notifications` (`read`): Apple's notifications as every node received them.
    func notifications(_ viewer: ConsolePages.Viewer) async throws -> Response {
        let counts = try await actions.notificationCounts()
        let events = try await actions.notificationEvents()
        let page = NotificationsPage(
            counts: counts.map { NotificationsPage.Count(type: $0.type, outcome: $0.outcome, count: $0.count) },
            events: events.map {
                NotificationsPage.Event(at: ConsolePages.time($0.at), type: $0.type, outcome: $0.outcome)
            },
            limit: OperatorActions.notificationListLimit
        )
        return ConsolePages.render("console-notifications", title: "Apple notifications", viewer: viewer, page)
    }

    /// The overview's chart of Apple notifications over the window: one bar per type and outcome.
    static func notificationBars(_ counts: [NotificationEventCount]) -> [String: Int] {
        counts.reduce(into: [:]) { $0["\($1.type) \($1.outcome)"] = $1.count }
    }
}
