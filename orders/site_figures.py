"""Site-wide trading figures read from the database: what every process did, not one process's memory.

Each function is a fixed number of aggregate queries (GROUP BY over indexed or small
tables), whatever the number of accounts, orders or instruments, so /metrics and
/internal/health can call them on every scrape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count

from orders.models import Fill, Order, OrderStatus, Outcome, Position, SignalOutcome
from orders.models.lifecycle import TERMINAL_STATUSES
from orders.models.outcomes import NOT_SETTLED, SETTLED_TRADED

# A signal's outcome falls in one of these; the outcome code is the refusal reason
# (a fixed set, so it can be a metric label; the free-text reason stays in the table).
TRADED = "traded"
PENDING = "pending"
REFUSED = "refused"


def signal_category(outcome: str) -> str:
    if outcome in SETTLED_TRADED:
        return TRADED
    if outcome in NOT_SETTLED:
        return PENDING
    return REFUSED


@dataclass(frozen=True)
class OrderFigures:
    orders_by_status: dict[str, int]  # every status listed, 0 when none
    open_orders: int
    fills: int
    fills_via_reconciliation: int
    open_positions_by_side: dict[str, int]
    signals_by_outcome: dict[str, int]  # outcome code -> rows (one per signal and account)
    signals_by_category: dict[str, int] = field(default_factory=dict)  # traded / pending / refused


def order_figures() -> OrderFigures:
    """Four queries: orders by status, fills, open positions by side, signal outcomes."""
    by_status = {status.value: 0 for status in OrderStatus}
    for status, n in Order.objects.order_by().values_list("status").annotate(n=Count("id")):
        by_status[status] = n
    fills = {False: 0, True: 0}
    for via_reconciliation, n in Fill.objects.order_by().values_list("via_reconciliation").annotate(n=Count("id")):
        fills[bool(via_reconciliation)] = n
    sides = {"LONG": 0, "SHORT": 0}
    open_positions = Position.objects.filter(state=Position.State.OPEN).order_by()
    for side, n in open_positions.values_list("side").annotate(n=Count("id")):
        sides[side] = n
    outcomes = {outcome.value: 0 for outcome in Outcome}
    for outcome, n in SignalOutcome.objects.order_by().values_list("outcome").annotate(n=Count("id")):
        outcomes[outcome] = n
    categories = {TRADED: 0, PENDING: 0, REFUSED: 0}
    for outcome, n in outcomes.items():
        categories[signal_category(outcome)] += n
    return OrderFigures(
        orders_by_status=by_status,
        open_orders=sum(n for status, n in by_status.items() if status not in TERMINAL_STATUSES),
        fills=fills[False] + fills[True],
        fills_via_reconciliation=fills[True],
        open_positions_by_side=sides,
        signals_by_outcome=outcomes,
        signals_by_category=categories,
    )
