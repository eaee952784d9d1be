"""Reads of the orders app, always scoped to the requesting user's accounts.

Pages, APIs and admin views build on these; none of them takes an account id without
the user, so a user can never reach another's orders, positions, ledger or audit.
"""
from __future__ import annotations

from typing import TypeAlias

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db.models import Q, QuerySet

from orders.models import Account, AuditEvent, CapitalLedger, Fill, LedgerEntry, Order, Position, SignalOutcome, TradeSetting

AnyUser: TypeAlias = AbstractBaseUser | AnonymousUser


def accounts_for_user(user: AnyUser) -> QuerySet[Account]:
    if not user.is_authenticated:
        return Account.objects.none()
    return Account.objects.filter(owner_id=user.pk)


def orders_for_user(user: AnyUser) -> QuerySet[Order]:
    return Order.objects.filter(account__in=accounts_for_user(user)).select_related("instrument", "account")


def open_orders_for_user(user: AnyUser) -> QuerySet[Order]:
    return orders_for_user(user).exclude(status__in=["FILLED", "CANCELED", "REJECTED", "EXPIRED"])


def fills_for_user(user: AnyUser) -> QuerySet[Fill]:
    return Fill.objects.filter(account__in=accounts_for_user(user)).select_related("order")


def positions_for_user(user: AnyUser, *, open_only: bool = False) -> QuerySet[Position]:
    positions = Position.objects.filter(account__in=accounts_for_user(user)).select_related("instrument", "account")
    return positions.filter(state=Position.State.OPEN) if open_only else positions


def ledgers_for_user(user: AnyUser) -> QuerySet[CapitalLedger]:
    return CapitalLedger.objects.filter(account__in=accounts_for_user(user)).select_related("account")


def ledger_entries_for_user(user: AnyUser) -> QuerySet[LedgerEntry]:
    return LedgerEntry.objects.filter(account__in=accounts_for_user(user))


def audit_events_for_user(user: AnyUser) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(account__in=accounts_for_user(user))


def order_for_user(user: AnyUser, order_id: int) -> Order:
    """Return one of the user's orders; Order.DoesNotExist (a 404) for anyone else's."""
    return orders_for_user(user).get(pk=order_id)


def signal_outcomes_for_user(user: AnyUser) -> QuerySet[SignalOutcome]:
    """Outcomes on the user's accounts, and unrouted ones (no account) of strategies trading on them."""
    if not user.is_authenticated:
        return SignalOutcome.objects.none()
    traded_strategies = TradeSetting.objects.filter(account__owner_id=user.pk).values("strategy_id")
    return SignalOutcome.objects.filter(
        Q(account__owner_id=user.pk) | Q(account__isnull=True, strategy_id__in=traded_strategies)
    )
