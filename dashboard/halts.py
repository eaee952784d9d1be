"""Kill switches engaged by the site itself: reconciliation halts an account it cannot vouch for.

Reconciliation (the orders app) calls this through the callable the runtime wiring
injects; it never imports the dashboard. The switch is the same one an operator sees
and releases on the dashboard: the site engages it with the reason, only a person
releases it. A switch a person engaged keeps that person's reason.
"""

from __future__ import annotations

from django.db import transaction

from core.push_groups import user_group
from dashboard.metrics import CONTROL_CHANGES
from dashboard.models import ControlAction, ControlAudit, KillSwitch
from dashboard.selectors import account_scope
from dashboard.services import _push_controls_on_commit
from orders.models import Account

SYSTEM_ACTOR = "reconciliation"
RISK_ACTOR = "risk-limits"


def entries_halt_by_reconciliation(account_id: int, reason: str) -> bool:
    """Engage the account's kill switch with `reason`; return whether anything changed."""
    return _entries_halt(account_id, reason, actor_name=SYSTEM_ACTOR)


def entries_halt_by_risk_limit(account_id: int, reason: str) -> bool:
    """Engage the account's kill switch for a risk limit (the daily loss), audited as `risk-limits`."""
    return _entries_halt(account_id, reason, actor_name=RISK_ACTOR)


def _entries_halt(account_id: int, reason: str, *, actor_name: str) -> bool:
    text = reason[:300]
    with transaction.atomic():
        account = Account.objects.get(pk=account_id)
        scope = account_scope(account_id)
        switch, _ = KillSwitch.objects.select_for_update().get_or_create(
            scope=scope, defaults={"account_id": account_id}
        )
        if switch.engaged and (switch.changed_by_id is not None or switch.reason == text):
            return False
        before = {"engaged": switch.engaged, "reason": switch.reason}
        switch.engaged = True
        switch.reason = text
        switch.changed_by = None
        switch.save()
        CONTROL_CHANGES.labels(ControlAction.KILL_SWITCH_ENGAGE.value).inc()
        ControlAudit.objects.create(
            actor=None,
            actor_name=actor_name,
            action=ControlAction.KILL_SWITCH_ENGAGE,
            target=f"kill switch of account {account.name}",
            account_id=account_id,
            reason=text,
            before=before,
            after={"engaged": True, "reason": text},
        )
        _push_controls_on_commit(
            user_group(account.owner_id), {"object": "kill_switch", "scope": scope, "engaged": True, "reason": text}
        )
    return True
