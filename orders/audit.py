"""The audit trail writer: structured rows plus one log line per event."""
from __future__ import annotations

import logging
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
