"""Read paths of the dashboard and the API, every one scoped to the requesting user.

Tenancy rule (DESIGN.md): a user sees their own accounts and what hangs off them. A
strategy belongs to no one, so a user sees the strategies that trade on one of their
accounts (through a trade setting), and those strategies' signals and outputs.
"""
from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from dashboard.models import ControlAudit, KillSwitch
from orders.models import Account, TradeSetting
from processor.models import Strategy, StrategySignal

GLOBAL_SCOPE = "global"

User = AbstractBaseUser | AnonymousUser


def account_scope(account_id: int) -> str:
    return f"account:{account_id}"


def accounts_for_user(user: User) -> QuerySet[Account]:
    if not user.is_authenticated:
        return Account.objects.none()
    return Account.objects.filter(owner_id=user.pk)


def trade_settings_for_user(user: User) -> QuerySet[TradeSetting]:
    if not user.is_authenticated:
        return TradeSetting.objects.none()
    return TradeSetting.objects.filter(account__owner_id=user.pk).select_related("strategy", "account")


def strategies_for_user(user: User) -> QuerySet[Strategy]:
    if not user.is_authenticated:
        return Strategy.objects.none()
    return Strategy.objects.filter(id__in=visible_strategy_ids(user_id=user.pk))


def visible_strategy_ids(*, user_id: int) -> frozenset[int]:
    """Ids of the strategies trading on any of the user's accounts (one query)."""
    return frozenset(
        TradeSetting.objects.filter(account__owner_id=user_id).values_list("strategy_id", flat=True).distinct()
    )


def signals_for_user(user: User) -> QuerySet[StrategySignal]:
    if not user.is_authenticated:
        return StrategySignal.objects.none()
    return StrategySignal.objects.filter(strategy_id__in=visible_strategy_ids(user_id=user.pk))


def kill_switches_for_user(user: User) -> dict[str, KillSwitch]:
    """The global switch and the user's account switches that exist, by scope."""
    if not user.is_authenticated:
        return {}
    scopes = [GLOBAL_SCOPE] + [account_scope(pk) for pk in accounts_for_user(user).values_list("pk", flat=True)]
    return {switch.scope: switch for switch in KillSwitch.objects.filter(scope__in=scopes)}


def entries_halted(*, account_id: int) -> str | None:
    """Why new entries on this account must not be placed now, or None when they may.

    For the trade executor, before every entry: the global switch stops every account,
    an account switch stops that account. Exits are never halted (positions must be
    able to close). One query.
    """
    for switch in KillSwitch.objects.filter(scope__in=[GLOBAL_SCOPE, account_scope(account_id)], engaged=True):
        where = "global kill switch" if switch.scope == GLOBAL_SCOPE else "account kill switch"
        return f"{where} engaged" + (f": {switch.reason}" if switch.reason else "")
    return None


def control_audit_for_user(user: User) -> QuerySet[ControlAudit]:
    """Control changes on the user's accounts or made by the user; staff also see global ones."""
    if not user.is_authenticated:
        return ControlAudit.objects.none()
    visible = Q(account__owner_id=user.pk) | Q(actor_id=user.pk)
    if getattr(user, "is_staff", False):
        visible |= Q(account__isnull=True)
    return ControlAudit.objects.filter(visible)
