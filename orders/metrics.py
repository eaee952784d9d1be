"""Prometheus metrics of the trading side; /internal/health sums them into its counts."""

from prometheus_client import Counter, Gauge, Histogram

ENTRIES = Counter("orders_entries_total", "Entry attempts by outcome", ["outcome"])
EXITS = Counter("orders_exits_total", "Exit attempts by outcome", ["outcome"])
LOCK_CONTENTION = Counter("orders_lock_contention_total", "Entry or reconciliation locks found held", ["scope"])
LOCK_ACQUIRE_SECONDS = Histogram("orders_lock_acquire_seconds", "Time to take an entry lock")
BROKER_LATENCY = Histogram("orders_broker_latency_seconds", "Broker call latency", ["broker", "call"])
SIGNAL_TO_ACK_SECONDS = Histogram("orders_signal_to_ack_seconds", "Signal emission to persisted broker ack")
RECONCILIATION_MISMATCHES = Counter("orders_reconciliation_mismatches_total", "Corrections applied", ["kind"])
RECONCILIATION_MISSING_AT_BROKER = Gauge(
    "orders_reconciliation_missing_at_broker", "Open orders of the last pass the broker did not know"
)
RECONCILIATION_MISSING_IN_DB = Gauge(
    "orders_reconciliation_missing_in_db", "Broker orders of the last pass with no order row"
)
RECONCILIATION_LAST_RUN = Gauge("orders_reconciliation_last_run_timestamp", "Unix time of the last pass")
CAPITAL_INVARIANT_VIOLATIONS = Counter(
    "orders_capital_invariant_violations_total", "Ledger checks or fills that broke the capital invariant"
)
SIGNAL_OUTCOMES = Counter(
    "orders_signal_outcomes_total", "Signals by what became of them on each account", ["kind", "outcome"]
)
RECONCILIATION_EXPOSURE_MISMATCHES = Counter(
    "orders_reconciliation_exposure_mismatches_total",
    "Symbols whose net position at the broker differed from the site's, after missed fills were applied",
)
RECONCILIATION_DEGRADED_STEPS = Counter(
    "orders_reconciliation_degraded_steps_total", "Broker reads a reconciliation pass went without", ["step"]
)
LOST_CONNECTION_OUTCOMES = Counter(
    "orders_lost_connection_outcomes_total",
    "Order calls cut off by a lost database connection, by what they turned out to be",
    ["outcome"],
)
UNRESOLVED_PROMPTS = Counter(
    "orders_unresolved_prompts_total", "Pending intents no broker read could resolve, raised to a person"
)
RECONCILIATION_AWAITING_DECISION = Gauge(
    "orders_reconciliation_awaiting_decision", "Pending intents of the last pass waiting for a person's decision"
)
