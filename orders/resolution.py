"""Unknown broker outcomes: the clock on an unresolved intent, the operator prompt, and a person's decision.

An entry whose placement timed out keeps its reservation while its outcome is unknown.
Reconciliation resolves it by the broker's order list, else by looking the client id up;
when neither answers (a venue that serves no order reads, an outage), the intent is
marked unresolved and, once that has lasted ORDERS_UNRESOLVED_PROMPT_AFTER_S, a person
is asked to decide. Capital is never held in silence: the prompt is audited, counted on
health and listed on the dashboard until someone answers it.

A database connection that breaks in the middle of an order call is an unknown outcome
too: the broker may have accepted the order whose lifecycle was not yet written. Such
an error is never recorded as a plain failure while the intent still holds capital
(`failure_outcome`); the intent is put on the same clock as a broker timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError, InterfaceError, OperationalError, transaction
from django.utils import timezone

from core.fixed_point import fixed_to_str
from orders import lifecycle
from orders.audit import audit_record
from orders.db import in_db_thread
from orders.metrics import LOST_CONNECTION_OUTCOMES, UNRESOLVED_PROMPTS
from orders.models import OrderIntent
from orders.models.outcomes import Outcome
from orders.outcomes import signal_outcome_settle


@dataclass(frozen=True)
class AwaitingDecision:
    client_order_id: str
    reserved: int
    prompted_at: datetime


def intents_unresolved_record(
    *, client_order_ids: list[str], prompt_after_s: float, now: datetime | None = None
) -> list[str]:
    """Start the clock on intents no step could resolve; prompt those past the limit. Return the newly prompted ids."""
    current = now or timezone.now()
    prompted: list[str] = []
    for client_order_id in client_order_ids:
        with transaction.atomic():
            intent = OrderIntent.objects.select_for_update().filter(client_order_id=client_order_id).first()
            if intent is None or intent.state != OrderIntent.State.PENDING or intent.operator_prompted_at is not None:
                continue
            if intent.unresolved_since is None:
                intent.unresolved_since = current
                intent.save(update_fields=["unresolved_since", "updated_at"])
                continue
            if current - intent.unresolved_since < timedelta(seconds=prompt_after_s):
                continue
            intent.operator_prompted_at = current
            intent.save(update_fields=["operator_prompted_at", "updated_at"])
            audit_record(
                event="reconcile.operator_prompt",
                account_id=intent.account_id,
                strategy_id=intent.strategy_id,
                client_order_id=client_order_id,
                message=(
                    f"the broker could not say whether it has this order for {prompt_after_s:.0f}s; "
                    f"{fixed_to_str(intent.reserved)} stays reserved until a person decides"
                ),
                details={
                    "reserved": fixed_to_str(intent.reserved),
                    "unresolved_since": intent.unresolved_since.isoformat(),
                },
            )
            UNRESOLVED_PROMPTS.inc()
            prompted.append(client_order_id)
    return prompted


def intents_awaiting_decision(*, account_id: int) -> list[AwaitingDecision]:
    """The account's pending intents a person was asked to decide on, oldest first."""
    rows = OrderIntent.objects.filter(
        account_id=account_id, state=OrderIntent.State.PENDING, operator_prompted_at__isnull=False
    ).order_by("operator_prompted_at", "pk")
    return [AwaitingDecision(row.client_order_id, row.reserved, row.operator_prompted_at) for row in rows]  # type: ignore[arg-type]


def intent_release_by_operator(*, client_order_id: str, operator: str) -> bool:
    """A person says the broker never had this order: release its reservation. Returns whether it changed.

    Goes through the lifecycle's abandon handler, like a broker answer of "no such
    order" would; the signal's outcome becomes abandoned.
    """
    changed = lifecycle.intent_abandon(
        client_order_id=client_order_id, reason=f"{operator} decided the broker never had it", via_reconciliation=True
    )
    if changed:
        signal_outcome_settle(
            client_order_id=client_order_id,
            outcome=Outcome.ABANDONED,
            reason=f"released by {operator}: never at the broker",
        )
    return changed


def intent_keep_waiting(*, client_order_id: str, operator: str, now: datetime | None = None) -> bool:
    """A person chose to wait: the prompt is withdrawn and the clock starts again. Returns whether it changed.

    The intent keeps its reservation; reconciliation keeps asking the broker, and the
    prompt comes back after the same limit if the broker still cannot say.
    """
    current = now or timezone.now()
    with transaction.atomic():
        intent = OrderIntent.objects.select_for_update().filter(client_order_id=client_order_id).first()
        if intent is None or intent.state != OrderIntent.State.PENDING or intent.operator_prompted_at is None:
            return False
        intent.operator_prompted_at = None
        intent.unresolved_since = current
        intent.save(update_fields=["operator_prompted_at", "unresolved_since", "updated_at"])
        audit_record(
            event="reconcile.keep_waiting",
            account_id=intent.account_id,
            strategy_id=intent.strategy_id,
            client_order_id=client_order_id,
            message=f"{operator} chose to keep waiting; {fixed_to_str(intent.reserved)} stays reserved",
        )
    return True


def connection_lost(error: BaseException) -> bool:
    """Whether `error` says the database connection broke (the statement's effect is not known)."""
    return isinstance(error, (OperationalError, InterfaceError))


def lost_connection_outcome(*, client_order_id: str, error: BaseException) -> tuple[Outcome, str]:
    """What an order call cut off by a lost database connection did, read back on a fresh connection.

    No intent: the reserve never committed and nothing was sent. A pending intent may
    be at the broker: it stays reserved and starts the unresolved clock, and the
    resolution (reconciliation, lookup by client id, a person) settles it. A placed
    intent committed before the connection went.
    """
    row = OrderIntent.objects.filter(client_order_id=client_order_id).values_list("state", "reserved").first()
    if row is None:
        LOST_CONNECTION_OUTCOMES.labels("failed").inc()
        return Outcome.FAILED, f"database connection lost before the order was reserved; nothing sent ({error!r})"
    state, reserved = row
    if state == OrderIntent.State.PLACED:
        LOST_CONNECTION_OUTCOMES.labels("placed").inc()
        return Outcome.PLACED, "persisted before the database connection was lost"
    if state == OrderIntent.State.ABANDONED:
        LOST_CONNECTION_OUTCOMES.labels("abandoned").inc()
        return Outcome.ABANDONED, f"never at the broker; released before the database connection was lost ({error!r})"
    lifecycle.intent_mark_unresolved(client_order_id=client_order_id)
    LOST_CONNECTION_OUTCOMES.labels("unknown").inc()
    return Outcome.UNKNOWN, (
        f"database connection lost mid-order ({error!r}); the broker may have it: "
        f"{fixed_to_str(reserved)} stays reserved until reconciliation resolves it"
    )


async def failure_outcome(error: BaseException, client_order_id: str) -> tuple[Outcome, str]:
    """The outcome to record for an unexpected error on an order's path: failed, unless the connection was lost."""
    if not client_order_id or not connection_lost(error):
        return Outcome.FAILED, f"unexpected error: {error!r}"
    try:
        return await in_db_thread(lost_connection_outcome)(client_order_id=client_order_id, error=error)
    except DatabaseError as again:
        # Still no database: nothing can be read or written now; whatever the intent
        # holds stays for reconciliation, which lists every pending intent.
        return Outcome.UNKNOWN, f"database connection lost mid-order ({error!r}; again: {again!r})"
