"""The writer of SignalOutcome: every signal ends in one recorded outcome per account.

Each decision is an upsert of the (signal, account) row, one audit event and one
metric increment, so the audit log, the API, the metrics and the dashboard tell the
same story. A later decision on the same signal (the reversal entry placed once its
exit filled, an unknown outcome resolved) replaces the earlier one. Each decision is
also pushed, after commit, to the dashboards of the users who may see it (the account's
owner; for a signal that reached no account, everyone whose accounts trade the strategy).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from core.push_groups import user_group
from orders.account_audience import account_owner_and_name
from orders.audit import audit_record, audit_record_many
from orders.events import messages_after_commit
from orders.metrics import SIGNAL_OUTCOMES
from orders.models import SignalOutcome
from orders.models.outcomes import NOT_SETTLED, SETTLED_TRADED, Outcome
from orders.plans import signal_key
from orders.rows import insert_rows_later
from processor.signals import Signal

log = logging.getLogger(__name__)

# The browser sees this type unchanged (dashboard.consumers relays unknown types as they are).
OUTCOME_EVENT = "signal.outcome"


def signal_outcome_record(
    *,
    signal: Signal,
    account_id: int | None,
    outcome: Outcome,
    reason: str = "",
    client_order_id: str = "",
) -> SignalOutcome:
    """Record (or replace) what became of `signal` on `account_id`, with its audit event and metric.

    The row is one upsert statement on its (signal, account) key, so a concurrent
    decision on the same signal (another process) is serialized by the database and
    the later one wins, with no read before the write.
    """
    key = signal_key(signal)
    values = {
        "strategy_id": signal.strategy_id,
        "strategy_name": signal.strategy_name[:60],
        "feed": signal.feed[:50],
        "symbol": signal.symbol[:120],
        "signal_kind": str(signal.kind),
        "output_id": signal.output_id,
        "occurrence_ns": signal.occurrence_ns,
        "outcome": str(outcome),
        "reason": reason[:500],
        "client_order_id": client_order_id,
    }
    with transaction.atomic(savepoint=False):
        row = _outcome_upsert(key, account_id, values)
        audit_record(
            event=f"signal.{outcome}",
            account_id=account_id,
            strategy_id=signal.strategy_id,
            client_order_id=client_order_id,
            message=f"{signal.strategy_name} {signal.kind} {signal.symbol}: {reason or Outcome(outcome).label}",
            details={"signal_key": key, "output_id": signal.output_id},
        )
        _push_outcome_on_commit(row)
    outcome_counter(str(signal.kind), str(outcome)).inc()
    return row


def _outcome_upsert(key: str, account_id: int | None, values: dict[str, Any]) -> SignalOutcome:
    """INSERT ... ON CONFLICT DO UPDATE on the partial unique index that applies; return the row as written."""
    now = timezone.now()
    table = connection.ops.quote_name(SignalOutcome._meta.db_table)
    names = ["signal_key", "account_id", *values, "created_at", "updated_at"]
    stored = connection.ops.adapt_datetimefield_value(now)
    params = [key, account_id, *values.values(), stored, stored]
    if account_id is None:
        target = "(signal_key) WHERE account_id IS NULL"
    else:
        target = "(signal_key, account_id) WHERE account_id IS NOT NULL"
    updates = ", ".join(f"{name} = excluded.{name}" for name in [*values, "updated_at"])
    sql = (
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))}) "
        f"ON CONFLICT {target} DO UPDATE SET {updates} RETURNING id, created_at"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row_id, created_at = cursor.fetchone()
    created_at = _aware(created_at)
    return SignalOutcome(
        id=row_id, signal_key=key, account_id=account_id, created_at=created_at, updated_at=now, **values
    )


@dataclass(frozen=True, slots=True)
class Decision:
    """What became of a signal on one account (a row of `signal_outcomes_record_many`)."""

    account_id: int
    outcome: Outcome
    reason: str = ""
    client_order_id: str = ""


_OUTCOME_COLUMNS = (
    "signal_key",
    "account_id",
    "strategy_id",
    "strategy_name",
    "feed",
    "symbol",
    "signal_kind",
    "output_id",
    "occurrence_ns",
    "outcome",
    "reason",
    "client_order_id",
    "created_at",
    "updated_at",
)
_OUTCOME_UPDATES = ", ".join(
    f"{name} = excluded.{name}" for name in ("outcome", "reason", "client_order_id", "updated_at")
)
_counters: dict[tuple[str, str], Any] = {}


def outcome_counter(kind: str, outcome: str) -> Any:
    """The metric child of (signal kind, outcome), looked up once."""
    child = _counters.get((kind, outcome))
    if child is None:
        child = _counters[(kind, outcome)] = SIGNAL_OUTCOMES.labels(kind, outcome)
    return child


def signal_outcomes_record_many(*, signal: Signal, decisions: Sequence[Decision]) -> None:
    """`signal_outcome_record` for several accounts of one signal: one upsert, one audit insert, one push.

    Each account's row, audit event and metric are exactly those `signal_outcome_record`
    writes. A DUPLICATE (the same signal seen again) is audited and counted but never
    touches the signal's row: that row belongs to the handling that created the intent.
    """
    signal_outcomes_record_batch([(signal, decisions)])


def signal_outcomes_record_batch(items: Sequence[tuple[Signal, Sequence[Decision]]]) -> None:
    """`signal_outcomes_record_many` for several signals at once: one upsert, one audit insert, one push for all.

    A batch of signals (one account each) decided in one transaction writes its outcomes
    in one statement instead of one per signal; each row, event and metric is the one
    `signal_outcomes_record_many` writes for its signal.
    """
    now = timezone.now()
    rows: list[tuple[Any, ...]] = []
    audits: list[dict[str, Any]] = []
    pushes: list[tuple[int, dict[str, Any]]] = []
    counted: list[tuple[str, str]] = []
    decided_at = now.isoformat()
    for signal, decisions in items:
        if not decisions:
            continue
        key = signal_key(signal)
        kind = str(signal.kind)
        head = (
            signal.strategy_id,
            signal.strategy_name[:60],
            signal.feed[:50],
            signal.symbol[:120],
            kind,
            signal.output_id,
            signal.occurrence_ns,
        )
        details = {"signal_key": key, "output_id": signal.output_id}
        for decision in decisions:
            outcome = str(decision.outcome)
            reason = decision.reason[:500]
            if decision.outcome != Outcome.DUPLICATE:
                rows.append((key, decision.account_id, *head, outcome, reason, decision.client_order_id, now, now))
                pushes.append(
                    (
                        decision.account_id,
                        _outcome_message(
                            strategy_id=signal.strategy_id,
                            feed=head[2],
                            symbol=head[3],
                            kind=kind,
                            output_id=signal.output_id,
                            occurrence_ns=signal.occurrence_ns,
                            account_id=decision.account_id,
                            outcome=outcome,
                            reason=reason,
                            client_order_id=decision.client_order_id,
                            decided_at=decided_at,
                        ),
                    )
                )
            audits.append(
                {
                    "event": f"signal.{outcome}",
                    "account_id": decision.account_id,
                    "strategy_id": signal.strategy_id,
                    "client_order_id": decision.client_order_id,
                    "message": f"{signal.strategy_name} {signal.kind} {signal.symbol}: "
                    f"{decision.reason or Outcome(decision.outcome).label}",
                    "details": details,
                }
            )
            counted.append((kind, outcome))
    if not audits:
        return
    with transaction.atomic(savepoint=False):
        if rows:
            _outcomes_upsert(rows)
        audit_record_many(audits)
        if pushes:
            _push_events_on_commit(pushes)
    for kind, outcome in counted:
        outcome_counter(kind, outcome).inc()


def _outcomes_upsert(rows: list[tuple[Any, ...]]) -> None:
    """One multi-row upsert on (signal, account), every row written (inserted or updated).

    Nothing is read back, so it travels with the transaction's next round trip
    (orders.round_trips).
    """
    insert_rows_later(
        SignalOutcome,
        _OUTCOME_COLUMNS,
        rows,
        suffix=f"ON CONFLICT (signal_key, account_id) WHERE account_id IS NOT NULL DO UPDATE SET {_OUTCOME_UPDATES}",
    )


def _aware(created_at: Any) -> datetime:
    if isinstance(created_at, str):
        created_at = datetime.fromisoformat(created_at)
    if timezone.is_naive(created_at):  # SQLite stores UTC without its offset
        created_at = created_at.replace(tzinfo=UTC)
    return created_at


def signal_outcome_settle(*, client_order_id: str, outcome: Outcome, reason: str = "") -> int:
    """Settle the outcome of the signal behind an order once its broker outcome is known; return rows changed.

    Used when an unknown outcome is resolved later (adopted by reconciliation: placed;
    the broker never had it: abandoned).
    """
    rows = list(SignalOutcome.objects.filter(client_order_id=client_order_id).exclude(outcome=outcome))
    for row in rows:
        row.outcome = outcome
        row.reason = reason[:500]
        row.save(update_fields=["outcome", "reason", "updated_at"])
        audit_record(
            event=f"signal.{outcome}",
            account_id=row.account_id,
            strategy_id=row.strategy_id,
            client_order_id=client_order_id,
            message=f"{row.strategy_name} {row.signal_kind} {row.symbol}: {reason or Outcome(outcome).label}",
            details={"signal_key": row.signal_key, "output_id": row.output_id},
        )
        _push_outcome_on_commit(row)
        SIGNAL_OUTCOMES.labels(row.signal_kind, str(outcome)).inc()
    return len(rows)


# -- live push to dashboards -----------------------------------------------------------


def outcome_event(row: SignalOutcome) -> dict[str, Any]:
    """The browser's view of one outcome: which signal (strategy, output, kind) and what became of it.

    Plain JSON types only: the Redis channel layer packs messages with msgpack.
    """
    return _outcome_message(
        strategy_id=row.strategy_id,
        feed=row.feed,
        symbol=row.symbol,
        kind=row.signal_kind,
        output_id=row.output_id,
        occurrence_ns=row.occurrence_ns,
        account_id=row.account_id,
        outcome=str(row.outcome),
        reason=row.reason,
        client_order_id=row.client_order_id,
        decided_at=row.updated_at.isoformat() if row.updated_at else None,
    )


def _outcome_message(
    *,
    strategy_id: int | None,
    feed: str,
    symbol: str,
    kind: str,
    output_id: str,
    occurrence_ns: int,
    account_id: int | None,
    outcome: str,
    reason: str,
    client_order_id: str,
    decided_at: str | None,
) -> dict[str, Any]:
    # From plain values: building a model instance per row only to read it back costs
    # more than the row's share of the upsert on the fan-out path.
    return {
        "type": OUTCOME_EVENT,
        "strategy_id": strategy_id,
        "feed": feed,
        "venue_symbol": symbol,
        "kind": kind,
        "output_id": output_id,
        "occurrence_time_ms": occurrence_ns // 1_000_000,
        "account": account_id,
        "outcome": outcome,
        "outcome_label": _LABELS[outcome],
        "reason": reason,
        "client_order_id": client_order_id,
        "traded": outcome in SETTLED_TRADED,
        "settled": outcome not in NOT_SETTLED,
        "decided_at": decided_at,
    }


_LABELS = {str(outcome): str(outcome.label) for outcome in Outcome}


def _push_outcome_on_commit(row: SignalOutcome) -> None:
    # Built now, so the push shows this decision even if a later one lands before commit.
    layer = get_channel_layer()
    if layer is None:
        return
    event = outcome_event(row)
    try:
        audience = _audience(row.account_id, row.strategy_id)
    except Exception:  # a dashboard that misses a push shows the outcome on its next load
        log.warning("orders: signal outcome push for account %s failed", row.account_id, exc_info=True)
        return
    if audience is None:
        return
    owners, account_name = audience
    message = {**event, "account_name": account_name}
    messages_after_commit(
        [(user_group(owner_id), message) for owner_id in owners], f"signal outcome push for account {row.account_id}"
    )


def _push_events_on_commit(events: Sequence[tuple[int, dict[str, Any]]]) -> None:
    """`_push_outcome_on_commit` for several (account, event) pairs: one after-commit send, in order."""
    layer = get_channel_layer()
    if layer is None or not events:
        return
    messages: list[tuple[str, dict[str, Any]]] = []
    for account_id, event in events:
        try:
            audience = _audience(account_id, event["strategy_id"])
        except Exception:  # a dashboard that misses a push shows the outcome on its next load
            log.warning("orders: signal outcome push for account %s failed", account_id, exc_info=True)
            continue
        if audience is None:
            continue
        owners, account_name = audience
        message = {**event, "account_name": account_name}
        messages.extend((user_group(owner_id), message) for owner_id in owners)
    messages_after_commit(messages, f"signal outcome push for {len(events)} accounts")


def _audience(account_id: int | None, strategy_id: int | None) -> tuple[list[int], str] | None:
    """Who may see an outcome (owner ids) and the account's name; None when no one."""
    from orders.models import TradeSetting

    if account_id is not None:
        known = account_owner_and_name(account_id)
        return None if known is None else ([known[0]], known[1])
    if strategy_id is not None:
        # No account traded it: the same users who see the strategy's signals.
        owners = list(
            TradeSetting.objects.filter(strategy_id=strategy_id).values_list("account__owner_id", flat=True).distinct()
        )
        return owners, ""
    return None
