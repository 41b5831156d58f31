/// What `Escrow` needs of a store, by capability. Each part is a protocol of its own, to read (and implement) one at a
/// time:
///
/// - ``EscrowRecordStore``: the escrows, their lifecycle commits and claims, purged bytes, readiness;
/// - ``MalformedRowStore``: rows that do not decode, handled through the lifecycle as records are;
/// - ``KeyVersionStore``: master key versions in use and retired;
/// - ``AuditTrailStore``: the audit hash chain, its reads and its archive cuts;
/// - ``OperatorReadStore``: the operator's counts and pages;
/// - ``DeliveryControlStore``: the cluster's switch that pauses and resumes deliveries;
/// - ``DeliveryRateStore``: the cluster's delivery rate, a schedule of slots shared by every worker;
/// - ``ConsoleSessionStore``: the console's sessions, shared by every node;
/// - ``BacklogHistoryStore``: the overview's backlog history, sampled by any node;
/// - ``PurgeReportCheckpointStore``: how far the purge report has verified the audit chain;
/// - ``NotificationEventLog``: the Apple notifications received, by type and outcome, for the operator.
///
/// None has a default that stands in for a store's own work: a store implements every requirement (the few shared
/// helpers, such as ``AuditTrailStore/auditCheckpoint()``, are derived from requirements and correct for any store).
///
/// What lives beside the escrows, in the same database when the store offers it, is not part of this protocol: a
/// store that keeps them conforms to ``SignInStore`` (web sign-in attempts), ``NotificationOutbox`` (handled Apple
/// notifications and their forwarded copies) and ``AccessTokenStore`` (the HTTP API's bearer tokens), and whoever
/// needs one is given it as that type (`Escrow`'s `signIns` and `notifications`, the HTTP application's).
///
/// The `EscrowStoreConformance` library holds the checks every implementation must pass (`StoreConformance.all`); run
/// them from the store's own test target.
public protocol EscrowStore:
    EscrowRecordStore, MalformedRowStore, KeyVersionStore, AuditTrailStore, OperatorReadStore, DeliveryControlStore,
    DeliveryRateStore, ConsoleSessionStore, BacklogHistoryStore, PurgeReportCheckpointStore,
    NotificationEventLog
{}
