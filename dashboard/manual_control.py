"""Manual control from the dashboard and the API: close, cancel, flatten, enter; each audited.

Each service runs the orders app's manual action (`orders.manual`: the trade executor,
ledger and broker path of a strategy's signal, scoped to the actor's accounts) on a
desk whose entry gate is the site's (kill switches, then the account's risk limits),
then appends one ControlAudit row with the actor's reason and every outcome. An object
of another user is DoesNotExist, as a missing one; a request that cannot be carried
out is `ManualRefused` (a form error), and neither leaves an audit row, since nothing
was done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from core.fixed_point import fixed_to_str
from core.push_groups import user_group
from dashboard.models import ControlAction
from dashboard.selectors import (
    entries_halted,
    entries_halted_from_rows,
    entries_halted_many,
    entries_halted_many_statement,
)
from dashboard.services import _audit, _push_controls_rollback_unsafe
from orders import manual
from orders.manual import ManualDesk, ManualOutcome, ManualRefused
from orders.models import Order, Position, TradeSetting
from orders.models.lifecycle import TERMINAL_STATUSES
from orders.risk_limits import entry_risk_refusal
from orders.selectors import accounts_for_user

__all__ = ["ManualRefused", "ManualReport"]

MAX_REASON = 300


@dataclass(frozen=True)
class ManualReport:
    """What a manual action did: one outcome per order it concerned, and the audit row's id."""

    action: ControlAction
    outcomes: list[ManualOutcome]
    audit_id: int

    @property
    def ok(self) -> bool:
        return bool(self.outcomes) and all(o.done for o in self.outcomes)

    def message(self) -> str:
        if not self.outcomes:
            return "nothing to do: no open position or working order"
        return "; ".join(o.describe() for o in self.outcomes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "action": self.action.value,
            "audit_id": self.audit_id,
            "message": self.message(),
            "outcomes": [o.as_dict() for o in self.outcomes],
        }


def site_entry_gate(account_id: int) -> str | None:
    """The gate of every entry on the site: kill switches, then the account's risk limits."""
    return entries_halted(account_id=account_id) or entry_risk_refusal(account_id)


class _SiteEntryGateMany:
    """site_entry_gate for a signal's accounts, the kill switches read in one statement.

    Called with the account ids it reads the switches itself. `statement` and
    `from_rows` split that read, so the trade executor sends it in the reserve
    transaction's first message, after the ledger row locks (the answer is the same:
    read under the locks, on its own snapshot).
    """

    def __call__(self, account_ids: Sequence[int]) -> dict[int, str | None]:
        return self._decide(account_ids, entries_halted_many(account_ids=account_ids))

    def statement(self, account_ids: Sequence[int]) -> tuple[str, list[Any]]:
        return entries_halted_many_statement(account_ids=account_ids)

    def from_rows(self, account_ids: Sequence[int], rows: Sequence[tuple[Any, ...]]) -> dict[int, str | None]:
        return self._decide(account_ids, entries_halted_from_rows(account_ids=account_ids, rows=rows))

    @staticmethod
    def _decide(account_ids: Sequence[int], halted: dict[int, str | None]) -> dict[int, str | None]:
        return {pk: halted[pk] or entry_risk_refusal(pk) for pk in account_ids}


site_entry_gate_many = _SiteEntryGateMany()


def _clean_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ManualRefused("reason: say why (it is kept in the audit log)")
    if len(reason) > MAX_REASON:
        raise ManualRefused(f"reason: at most {MAX_REASON} characters")
    return reason


def _run(
    *,
    actor: User,
    action: ControlAction,
    target: str,
    account_id: int,
    reason: str,
    call: Callable[[ManualDesk], Awaitable[list[ManualOutcome]]],
) -> ManualReport:
    reason = _clean_reason(reason)

    async def go() -> list[ManualOutcome]:
        desk = manual.manual_desk(entry_gate=site_entry_gate)
        try:
            return await call(desk)
        finally:
            await desk.close()

    outcomes = async_to_sync(go)()
    row = _audit(
        actor=actor,
        action=action,
        target=target,
        before={},
        after={"outcomes": [o.as_dict() for o in outcomes]},
        account_id=account_id,
        reason=reason,
    )
    _push_controls_rollback_unsafe(user_group(actor.pk), {"object": "manual", "action": action.value})
    return ManualReport(action=action, outcomes=outcomes, audit_id=row.pk)


def _one(outcome: Awaitable[ManualOutcome]) -> Awaitable[list[ManualOutcome]]:
    async def wrap() -> list[ManualOutcome]:
        return [await outcome]

    return wrap()


def manual_position_close(*, actor: User, position_id: int, reason: str) -> ManualReport:
    """Close one of the actor's open positions at market."""
    position = Position.objects.filter(account__in=accounts_for_user(actor), state=Position.State.OPEN).get(
        pk=position_id
    )
    return _run(
        actor=actor,
        action=ControlAction.POSITION_CLOSE,
        target=f"position {position.pk}",
        account_id=position.account_id,
        reason=reason,
        call=lambda desk: _one(manual.position_close(user=actor, position_id=position_id, desk=desk)),
    )


def manual_order_cancel(*, actor: User, order_id: int, reason: str) -> ManualReport:
    """Cancel one of the actor's working orders at the broker."""
    order = Order.objects.filter(account__in=accounts_for_user(actor)).get(pk=order_id)
    return _run(
        actor=actor,
        action=ControlAction.ORDER_CANCEL,
        target=f"order {order.client_order_id}",
        account_id=order.account_id,
        reason=reason,
        call=lambda desk: _one(manual.order_cancel(user=actor, order_id=order_id, desk=desk)),
    )


def manual_account_flatten(*, actor: User, account_id: int, reason: str) -> ManualReport:
    """Close every open position of the actor's account and cancel its working entries."""
    account = accounts_for_user(actor).get(pk=account_id)
    return _run(
        actor=actor,
        action=ControlAction.ACCOUNT_FLATTEN,
        target=f"account {account.name}",
        account_id=account.pk,
        reason=reason,
        call=lambda desk: manual.account_flatten(user=actor, account_id=account_id, desk=desk),
    )


def manual_entry(
    *, actor: User, trade_setting_id: int, instrument_id: int, side: str, quantity: Decimal | None, reason: str
) -> ManualReport:
    """Enter at market on one of the actor's trade settings (its quantity unless one is given)."""
    setting = (
        TradeSetting.objects.filter(account__in=accounts_for_user(actor))
        .select_related("strategy")
        .get(pk=trade_setting_id)
    )
    return _run(
        actor=actor,
        action=ControlAction.MANUAL_ENTRY,
        target=f"{side} entry for {setting.strategy.name}",
        account_id=setting.account_id,
        reason=reason,
        call=lambda desk: _one(
            manual.manual_entry(
                user=actor,
                trade_setting_id=trade_setting_id,
                instrument_id=instrument_id,
                side=side,
                quantity=quantity,
                desk=desk,
            )
        ),
    )


def manual_panel(user: User) -> dict[str, Any]:
    """The manual control panel: open positions, working orders, accounts, and what an entry can trade."""
    positions = list(
        Position.objects.filter(account__in=accounts_for_user(user), state=Position.State.OPEN)
        .select_related("account", "strategy", "instrument")
        .order_by("account_id", "pk")[:50]
    )
    orders = list(
        Order.objects.filter(account__in=accounts_for_user(user))
        .exclude(status__in=TERMINAL_STATUSES)
        .select_related("account", "instrument")
        .order_by("-pk")[:50]
    )
    settings = list(
        TradeSetting.objects.filter(account__in=accounts_for_user(user), enabled=True)
        .select_related("strategy", "account")
        .prefetch_related("strategy__instruments")
        .order_by("account__name", "strategy__name")
    )
    entry_choices = [
        {"setting": s, "instrument": instrument, "quantity": s.quantity.normalize()}
        for s in settings
        for instrument in s.strategy.instruments.all()
    ]
    return {
        "manual_positions": [{"position": p, "quantity": fixed_to_str(p.quantity)} for p in positions],
        "manual_orders": [{"order": o, "open": fixed_to_str(o.quantity - o.filled_quantity)} for o in orders],
        "manual_accounts": list(accounts_for_user(user).order_by("name")),
        "entry_choices": entry_choices,
    }
