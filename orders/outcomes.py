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
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import IntegrityError, transaction

from orders.audit import audit_record
from orders.metrics import SIGNAL_OUTCOMES
from orders.models import SignalOutcome
from orders.models.outcomes import NOT_SETTLED, Outcome
from orders.plans import signal_key
from processor.signals import Signal
from tradingsite.consumers import user_group

log = logging.getLogger(__name__)

# The browser sees this type unchanged (tradingsite.consumers relays unknown types as they are).
OUTCOME_EVENT = "signal.outcome"


def signal_outcome_record(
    *,
    signal: Signal,
    account_id: int | None,
    outcome: Outcome,
    reason: str = "",
    client_order_id: str = "",
) -> SignalOutcome:
    """Record (or replace) what became of `signal` on `account_id`, with its audit event and metric."""
    key = signal_key(signal)
    values = {
        "strategy_id": signal.strategy_id,
        "strategy_name": signal.strategy_name[:60],
        "feed": signal.feed[:50],
        "symbol": signal.symbol[:120],
        "signal_kind": str(signal.kind),
        "output_id": signal.output_id,
        "occurrence_ns": signal.occurrence_ns,
        "outcome": outcome,
        "reason": reason[:500],
        "client_order_id": client_order_id,
    }
    with transaction.atomic():
        try:
            with transaction.atomic():
                row, _ = SignalOutcome.objects.update_or_create(signal_key=key, account_id=account_id, defaults=values)
        except IntegrityError:
            # Created by a concurrent decision on the same signal: the update decides.
            row = SignalOutcome.objects.get(signal_key=key, account_id=account_id)
            for name, value in values.items():
                setattr(row, name, value)
            row.save()
        audit_record(
            event=f"signal.{outcome}",
            account_id=account_id,
            strategy_id=signal.strategy_id,
            client_order_id=client_order_id,
            message=f"{signal.strategy_name} {signal.kind} {signal.symbol}: {reason or Outcome(outcome).label}",
            details={"signal_key": key, "output_id": signal.output_id},
        )
        _push_outcome_on_commit(row)
    SIGNAL_OUTCOMES.labels(str(signal.kind), str(outcome)).inc()
    return row


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
    return {
        "type": OUTCOME_EVENT,
        "strategy_id": row.strategy_id,
        "feed": row.feed,
        "venue_symbol": row.symbol,
        "kind": row.signal_kind,
        "output_id": row.output_id,
        "occurrence_time_ms": row.occurrence_ns // 1_000_000,
        "account": row.account_id,
        "outcome": str(row.outcome),
        "outcome_label": Outcome(row.outcome).label,
        "reason": row.reason,
        "client_order_id": row.client_order_id,
        "traded": row.traded,
        "settled": row.outcome not in NOT_SETTLED,
        "decided_at": row.updated_at.isoformat() if row.updated_at else None,
    }


def _push_outcome_on_commit(row: SignalOutcome) -> None:
    # Built now, so the push shows this decision even if a later one lands before commit.
    event = outcome_event(row)
    account_id, strategy_id = row.account_id, row.strategy_id
    transaction.on_commit(lambda: push_outcome_rollback_unsafe(account_id=account_id, strategy_id=strategy_id, event=event))


def push_outcome_rollback_unsafe(*, account_id: int | None, strategy_id: int | None, event: dict[str, Any]) -> None:
    """Send one outcome to the dashboards allowed to see it, now; a failed push is logged, the row keeps the truth."""
    layer = get_channel_layer()
    if layer is None:
        return
    from orders.models import Account, TradeSetting

    try:
        if account_id is not None:
            owner = Account.objects.filter(pk=account_id).values("owner_id", "name").first()
            if owner is None:
                return
            event = {**event, "account_name": owner["name"]}
            owners = [owner["owner_id"]]
        elif strategy_id is not None:
            # No account traded it: the same users who see the strategy's signals.
            owners = list(
                TradeSetting.objects.filter(strategy_id=strategy_id).values_list("account__owner_id", flat=True).distinct()
            )
            event = {**event, "account_name": ""}
        else:
            return
        for owner_id in owners:
            async_to_sync(layer.group_send)(user_group(owner_id), event)
    except Exception:  # a dashboard that misses a push shows the outcome on its next load
        log.warning("orders: signal outcome push for account %s failed", account_id, exc_info=True)
