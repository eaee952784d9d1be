"""The writer of SignalOutcome: every signal ends in one recorded outcome per account.

Each decision is an upsert of the (signal, account) row, one audit event and one
metric increment, so the audit log, the API, the metrics and the dashboard tell the
same story. A later decision on the same signal (the reversal entry placed once its
exit filled, an unknown outcome resolved) replaces the earlier one.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction

from orders.audit import audit_record
from orders.metrics import SIGNAL_OUTCOMES
from orders.models import SignalOutcome
from orders.models.outcomes import Outcome
from orders.plans import signal_key
from processor.signals import Signal


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
        SIGNAL_OUTCOMES.labels(row.signal_kind, str(outcome)).inc()
    return len(rows)
