"""The audit trail writer: structured rows plus one log line per event."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from orders.models import AuditEvent

log = logging.getLogger("orders.audit")


def audit_record(
    *,
    event: str,
    account_id: int | None,
    message: str = "",
    client_order_id: str = "",
    strategy_id: int | None = None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    log.info("orders %s: account=%s order=%s %s", event, account_id, client_order_id, message)
    return AuditEvent.objects.create(
        event=event,
        account_id=account_id,
        strategy_id=strategy_id,
        client_order_id=client_order_id,
        message=message[:500],
        details=details or {},
    )


_COLUMNS = ("event", "account_id", "strategy_id", "client_order_id", "message", "details", "created_at")


_BATCH: ContextVar[list[dict[str, Any]] | None] = ContextVar("orders_audit_batch", default=None)


@contextmanager
def audit_batch() -> Iterator[None]:
    """Gather the `audit_record_many` calls made inside into one insert when the block ends without an error.

    For a transaction that audits in several places: its events still commit with it.
    """
    gathered: list[dict[str, Any]] = []
    token = _BATCH.set(gathered)
    try:
        yield
    finally:
        _BATCH.reset(token)
    audit_record_many(gathered)


def audit_record_many(events: Sequence[dict[str, Any]]) -> None:
    """Write several audit events (audit_record's keyword arguments each) in one statement, one log line each."""
    if not events:
        return
    gathered = _BATCH.get()
    if gathered is not None:
        gathered.extend(events)
        return
    from django.utils import timezone

    from orders.rows import insert_rows_later

    logging_info = log.isEnabledFor(logging.INFO)
    now = timezone.now()
    rows = []
    for event in events:
        cid = event.get("client_order_id", "")
        message = event.get("message", "")
        if logging_info:
            log.info("orders %s: account=%s order=%s %s", event["event"], event["account_id"], cid, message)
        rows.append(
            (
                event["event"],
                event["account_id"],
                event.get("strategy_id"),
                cid,
                message[:500],
                event.get("details") or {},
                now,
            )
        )
    # Nothing is read back: with the transaction's next round trip where they share one (orders.round_trips).
    insert_rows_later(AuditEvent, _COLUMNS, rows)
