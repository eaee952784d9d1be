"""Write paths of the dashboard controls: strategy and trade-setting switches, kill switches.

Each service checks the actor may make the change, applies it under a row lock, appends
a ControlAudit row in the same transaction and, after commit, tells open dashboards.
A strategy is shared by every account that trades it, so only staff switch strategies
and the global kill switch; a user switches their own trade settings and accounts.
Each change is pushed only to the users who may see its object: a strategy's to the
owners of the accounts trading it, a trade setting's or an account's to its owner, the
global kill switch's to everyone.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import transaction

from core.push_groups import MARKET_GROUP, user_group
from dashboard.metrics import CONTROL_CHANGES
from dashboard.models import ControlAction, ControlAudit, KillSwitch
from dashboard.selectors import GLOBAL_SCOPE, account_scope, accounts_for_user, trade_settings_for_user
from orders.models import TradeSetting
from processor.models import Strategy

log = logging.getLogger(__name__)

CONTROLS_MESSAGE = "dashboard.controls"


def _audit(
    *,
    actor: User,
    action: ControlAction,
    target: str,
    before: dict[str, Any],
    after: dict[str, Any],
    account_id: int | None = None,
    reason: str = "",
) -> ControlAudit:
    CONTROL_CHANGES.labels(action.value).inc()
    return ControlAudit.objects.create(
        actor=actor,
        actor_name=actor.get_username(),
        action=action,
        target=target,
        account_id=account_id,
        reason=reason[:300],
        before=before,
        after=after,
    )


def _push_controls_rollback_unsafe(group: str, change: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, {"type": CONTROLS_MESSAGE, "change": change})
    except Exception:  # the change is committed; a dashboard that misses it catches up on reload
        log.warning("dashboard: controls push to %s failed", group, exc_info=True)


def _push_controls_on_commit(group: str, change: dict[str, Any]) -> None:
    transaction.on_commit(lambda: _push_controls_rollback_unsafe(group, change))


def _strategy_audience(strategy_id: int, actor: User) -> list[str]:
    """The groups of the users who may see a strategy: owners of accounts that trade it, and the actor.

    A strategy is visible only to users trading it (dashboard.selectors.visible_strategy_ids);
    the market group would tell every connected user that it exists and was switched.
    """
    owners = set(
        TradeSetting.objects.filter(strategy_id=strategy_id).values_list("account__owner_id", flat=True).distinct()
    )
    owners.add(actor.pk)
    return [user_group(owner_id) for owner_id in sorted(owners)]


def strategy_set_enabled(*, actor: User, strategy_id: int, enabled: bool, reason: str = "") -> Strategy:
    """Enable or disable a strategy (staff only); the processor picks it up on its next reconcile."""
    if not getattr(actor, "is_staff", False):
        raise PermissionDenied("only staff switch strategies: a strategy trades for every account")
    with transaction.atomic():
        strategy = Strategy.objects.select_for_update().get(pk=strategy_id)
        if strategy.enabled != enabled:
            before = {"enabled": strategy.enabled}
            strategy.enabled = enabled
            strategy.save(update_fields=["enabled", "updated_at"])
            action = ControlAction.STRATEGY_ENABLE if enabled else ControlAction.STRATEGY_DISABLE
            _audit(
                actor=actor,
                action=action,
                target=f"strategy {strategy.name}",
                before=before,
                after={"enabled": enabled},
                reason=reason,
            )
            change = {"object": "strategy", "id": strategy.pk, "enabled": enabled}
            for group in _strategy_audience(strategy.pk, actor):
                _push_controls_on_commit(group, change)
    return strategy


def trade_setting_set_enabled(*, actor: User, trade_setting_id: int, enabled: bool, reason: str = "") -> Any:
    """Enable or disable one of the actor's trade settings; another user's is DoesNotExist."""
    with transaction.atomic():
        setting = trade_settings_for_user(actor).select_for_update(of=("self",)).get(pk=trade_setting_id)
        if setting.enabled != enabled:
            before = {"enabled": setting.enabled}
            setting.enabled = enabled
            setting.save(update_fields=["enabled", "updated_at"])
            action = ControlAction.TRADE_SETTING_ENABLE if enabled else ControlAction.TRADE_SETTING_DISABLE
            _audit(
                actor=actor,
                action=action,
                target=f"trade setting {setting.strategy.name} on {setting.account.name}",
                before=before,
                after={"enabled": enabled},
                account_id=setting.account_id,
                reason=reason,
            )
            _push_controls_on_commit(
                user_group(setting.account.owner_id),
                {"object": "trade_setting", "id": setting.pk, "enabled": enabled},
            )
    return setting


def kill_switch_set(*, actor: User, account_id: int | None, engaged: bool, reason: str = "") -> KillSwitch:
    """Engage or release the global kill switch (account_id None, staff only) or an account's.

    An account the actor does not own is DoesNotExist, the same answer as a missing one.
    """
    with transaction.atomic():
        if account_id is None:
            if not getattr(actor, "is_staff", False):
                raise PermissionDenied("only staff switch the global kill switch")
            scope, target, group = GLOBAL_SCOPE, "global kill switch", MARKET_GROUP
        else:
            account = accounts_for_user(actor).get(pk=account_id)
            scope, target, group = (
                account_scope(account.pk),
                f"kill switch of account {account.name}",
                user_group(account.owner_id),
            )
        switch, _ = KillSwitch.objects.select_for_update().get_or_create(
            scope=scope, defaults={"account_id": account_id}
        )
        if switch.engaged != engaged or (engaged and reason and reason != switch.reason):
            before = {"engaged": switch.engaged, "reason": switch.reason}
            switch.engaged = engaged
            switch.reason = reason[:300] if engaged else ""
            switch.changed_by = actor
            switch.save()
            action = ControlAction.KILL_SWITCH_ENGAGE if engaged else ControlAction.KILL_SWITCH_RELEASE
            _audit(
                actor=actor,
                action=action,
                target=target,
                before=before,
                after={"engaged": engaged, "reason": switch.reason},
                account_id=account_id,
                reason=reason,
            )
            _push_controls_on_commit(
                group, {"object": "kill_switch", "scope": scope, "engaged": engaged, "reason": switch.reason}
            )
    return switch
