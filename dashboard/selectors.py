"""Read paths of the dashboard and the API, every one scoped to the requesting user.

Tenancy rule: a user sees their own accounts and what hangs off them. A
strategy belongs to no one, so a user sees the strategies that trade on one of their
accounts (through a trade setting), and those strategies' signals and outputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from dashboard.models import ControlAudit, KillSwitch
from feeds.models import Tick
from orders.models import Account, Fill, LedgerEntry, Order, Position, SignalOutcome, TradeSetting
from processor.models import Strategy, StrategySignal

GLOBAL_SCOPE = "global"

User = AbstractBaseUser | AnonymousUser


def account_scope(account_id: int) -> str:
    return f"account:{account_id}"


def accounts_for_user(user: User) -> QuerySet[Account]:
    if not user.is_authenticated:
        return Account.objects.none()
    return Account.objects.filter(owner_id=user.pk)


def accounts_with_ledger_for_user(user: User) -> QuerySet[Account]:
    return accounts_for_user(user).select_related("ledger", "kill_switch")


def ledger_entries_for_user(user: User, *, account_id: int | None = None) -> QuerySet[LedgerEntry]:
    entries = (
        LedgerEntry.objects.filter(account__owner_id=user.pk) if user.is_authenticated else LedgerEntry.objects.none()
    )
    if account_id is not None:
        entries = entries.filter(account_id=account_id)
    return entries.order_by("-id")


def orders_for_user(user: User) -> QuerySet[Order]:
    if not user.is_authenticated:
        return Order.objects.none()
    return Order.objects.filter(account__owner_id=user.pk).select_related("account", "strategy", "instrument__feed")


def fills_for_user(user: User) -> QuerySet[Fill]:
    if not user.is_authenticated:
        return Fill.objects.none()
    return Fill.objects.filter(account__owner_id=user.pk).select_related("order", "order__instrument")


def positions_for_user(user: User) -> QuerySet[Position]:
    """The user's positions, each with `last_price`: the newest recorded tick of its instrument (or None)."""
    if not user.is_authenticated:
        return Position.objects.none()
    newest_tick = Tick.objects.filter(instrument_id=OuterRef("instrument_id")).order_by("-ts_event").values("price")[:1]
    return (
        Position.objects.filter(account__owner_id=user.pk)
        .select_related("account", "strategy", "instrument__feed")
        .annotate(last_price=Subquery(newest_tick))
    )


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


def _outcomes_visible(user: User) -> Q:
    """Outcomes on the user's accounts, and those of signals that reached no account.

    Only ever applied to outcomes of signals the user may already see (same strategy),
    so the unrouted ones are exactly those of the user's visible strategies.
    """
    return Q(account__owner_id=user.pk) | Q(account__isnull=True)


def signals_with_outcome(signals: QuerySet[StrategySignal], user: User, outcome: str) -> QuerySet[StrategySignal]:
    """Narrow `signals` to those with a visible outcome of `outcome` (one EXISTS, no join fan-out)."""
    matching = SignalOutcome.objects.filter(
        _outcomes_visible(user),
        strategy_id=OuterRef("strategy_id"),
        output_id=OuterRef("output_id"),
        signal_kind=OuterRef("kind"),
        outcome=outcome,
    )
    return signals.filter(Exists(matching))


def signal_outcomes_attach(user: User, signals: Iterable[StrategySignal]) -> list[StrategySignal]:
    """Set `visible_outcomes` (account order) on each signal, in one query for all of them.

    The link is (strategy, output_id, kind): a reversal emits two signals from one output.
    """
    signals = list(signals)
    for signal in signals:
        signal.visible_outcomes = []  # type: ignore[attr-defined]
    if not signals or not user.is_authenticated:
        return signals
    by_link: dict[tuple[int | None, str, str], list[StrategySignal]] = {}
    for signal in signals:
        by_link.setdefault((signal.strategy_id, signal.output_id, signal.kind), []).append(signal)
    rows = (
        SignalOutcome.objects.filter(_outcomes_visible(user), output_id__in={s.output_id for s in signals})
        .select_related("account")
        .order_by("account_id", "id")
    )
    for row in rows:
        for signal in by_link.get((row.strategy_id, row.output_id, row.signal_kind), ()):
            signal.visible_outcomes.append(row)  # type: ignore[attr-defined]
    return signals


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
    switches = KillSwitch.objects.filter(scope__in=[GLOBAL_SCOPE, account_scope(account_id)], engaged=True)
    # The global switch first: it is the one an operator looks for.
    for switch in sorted(switches, key=lambda s: s.scope != GLOBAL_SCOPE):
        return _halt_reason(switch)
    return None


def entries_halted_many(*, account_ids: Sequence[int]) -> dict[int, str | None]:
    """entries_halted for each of `account_ids`, in one statement (the executor asks for a signal's accounts at once).

    Plain SQL: it runs in the reserve transaction under the ledger locks of every
    account, where building an ORM query would cost more than the statement.
    """
    from django.db import connection

    sql, params = entries_halted_many_statement(account_ids=account_ids)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return entries_halted_from_rows(account_ids=account_ids, rows=cursor.fetchall())


def entries_halted_many_statement(*, account_ids: Sequence[int]) -> tuple[str, list[Any]]:
    """The statement of `entries_halted_many`, to send with others (the reserve's lock message); rows to `entries_halted_from_rows`."""
    from orders.rows import any_of, table

    where, params = any_of("scope", [GLOBAL_SCOPE, *(account_scope(pk) for pk in account_ids)])
    return f"SELECT scope, reason FROM {table(KillSwitch)} WHERE engaged = %s AND {where}", [True, *params]


def entries_halted_from_rows(*, account_ids: Sequence[int], rows: Sequence[tuple[str, str]]) -> dict[int, str | None]:
    """`entries_halted_many`'s answer from the rows of its statement."""
    engaged = dict(rows)
    halted: dict[int, str | None] = {}
    for pk in account_ids:
        scope = GLOBAL_SCOPE if GLOBAL_SCOPE in engaged else account_scope(pk)
        halted[pk] = _halt_text(scope, engaged[scope]) if scope in engaged else None
    return halted


def entries_halted_by_account(user: User) -> dict[int, str | None]:
    """entries_halted for each of the user's accounts, in two queries."""
    account_ids = list(accounts_for_user(user).values_list("pk", flat=True))
    switches = {
        switch.scope: switch
        for switch in KillSwitch.objects.filter(
            scope__in=[GLOBAL_SCOPE, *(account_scope(pk) for pk in account_ids)], engaged=True
        )
    }
    halted: dict[int, str | None] = {}
    for pk in account_ids:
        switch = switches.get(GLOBAL_SCOPE) or switches.get(account_scope(pk))
        halted[pk] = None if switch is None else _halt_reason(switch)
    return halted


def _halt_reason(switch: KillSwitch) -> str:
    return _halt_text(switch.scope, switch.reason)


def _halt_text(scope: str, reason: str) -> str:
    where = "global kill switch" if scope == GLOBAL_SCOPE else "account kill switch"
    return f"{where} engaged" + (f": {reason}" if reason else "")


def control_audit_for_user(user: User) -> QuerySet[ControlAudit]:
    """Control changes on the user's accounts or made by the user; staff also see global ones."""
    if not user.is_authenticated:
        return ControlAudit.objects.none()
    visible = Q(account__owner_id=user.pk) | Q(actor_id=user.pk)
    if getattr(user, "is_staff", False):
        visible |= Q(account__isnull=True)
    return ControlAudit.objects.filter(visible)
