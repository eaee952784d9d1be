"""A person's decision on an order whose broker outcome no read could resolve.

Two answers, each scoped to the actor's own accounts (another user's intent is
DoesNotExist, the same answer as a missing one) and recorded in the control audit:
release the reservation because the broker never had the order (through the
lifecycle's abandon handler), or keep waiting (the prompt comes back after the same
limit if the broker still cannot say).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from core.fixed_point import fixed_to_str
from core.push_groups import user_group
from dashboard.metrics import CONTROL_CHANGES
from dashboard.models import ControlAction, ControlAudit
from dashboard.services import _push_controls_on_commit
from orders.models import OrderIntent
from orders.resolution import intent_keep_waiting, intent_release_by_operator


class Decision(str, Enum):
    RELEASE = "release"
    KEEP_WAITING = "wait"


def intents_needing_decision_for_user(user: User) -> list[OrderIntent]:
    """The user's pending intents a person was asked to decide on, oldest prompt first."""
    if not user.is_authenticated:
        return []
    return list(
        OrderIntent.objects.filter(
            account__owner_id=user.pk, state=OrderIntent.State.PENDING, operator_prompted_at__isnull=False
        )
        .select_related("account", "instrument")
        .order_by("operator_prompted_at", "pk")
    )


def unresolved_panel(user: User) -> dict[str, Any]:
    """Context of the "Orders needing a decision" panel."""
    rows = [
        {"intent": intent, "quantity": fixed_to_str(intent.quantity), "reserved": fixed_to_str(intent.reserved)}
        for intent in intents_needing_decision_for_user(user)
    ]
    return {"unresolved": rows}


def intent_decide(*, actor: User, client_order_id: str, decision: Decision, reason: str = "") -> bool:
    """Apply the actor's decision on one of their prompted intents; return whether it changed anything."""
    intent = OrderIntent.objects.select_related("account").get(
        client_order_id=client_order_id, account__owner_id=actor.pk, operator_prompted_at__isnull=False
    )
    operator = f"operator {actor.get_username()}"
    before = {"state": intent.state, "reserved": fixed_to_str(intent.reserved)}
    if decision is Decision.RELEASE:
        changed = intent_release_by_operator(client_order_id=client_order_id, operator=operator)
        action = ControlAction.INTENT_RELEASE
    else:
        changed = intent_keep_waiting(client_order_id=client_order_id, operator=operator)
        action = ControlAction.INTENT_KEEP_WAITING
    if not changed:
        return False
    intent.refresh_from_db()
    with transaction.atomic():
        CONTROL_CHANGES.labels(action.value).inc()
        ControlAudit.objects.create(
            actor=actor,
            actor_name=actor.get_username(),
            action=action,
            target=f"order {client_order_id} on {intent.account.name}",
            account_id=intent.account_id,
            reason=reason[:300],
            before=before,
            after={
                "state": intent.state,
                "reserved": fixed_to_str(intent.reserved if intent.state == "PENDING" else 0),
            },
        )
        _push_controls_on_commit(
            user_group(intent.account.owner_id),
            {"object": "intent", "client_order_id": client_order_id, "decision": decision.value},
        )
    return True
