"""Manual control: a person closes a position, cancels an order, flattens an account, enters.

None of these writes an order row itself. A close or an entry is a manual `Signal`
(output id `manual-<kind>-<uuid>`) executed on the one account it concerns through
`TradeExecutor.handle_plan`: the same entry lease, ledger reservation, broker call,
lifecycle transaction and recorded `SignalOutcome` as a strategy's signal. A cancel
asks the broker and books its answer through `order_sync` (the lifecycle handlers the
executor's exit flow uses to cancel a working entry). Every read is scoped to the
requesting user's accounts: another user's object is DoesNotExist, as a missing one.

The strategy a manual signal carries is the position's (a close) or the trade
setting's (an entry), so the position belongs to that strategy as if it had traded
it. The strategy's own state is not told: after a manual close its later exit is
recorded as `no_position`; after a manual entry the strategy may exit it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from feeds.market import fixed_from_decimal, fixed_to_decimal
from orders.brokers.base import Broker, BrokerRejected, BrokerUnavailable, OrderNotFound
from orders.brokers.kinds import PAPER
from orders.brokers.registry import BrokerNotConfigured, BrokerRegistry
from orders.db import in_db_thread
from orders.executor import EntryGate, ExecutorConfig, TradeExecutor, _never_halted
from orders.models import Order, Position, TradeSetting
from orders.models.lifecycle import TERMINAL_STATUSES, Intent, PositionSide
from orders.money import round_to_step
from orders.plans import TradePlan, plans_for_signal
from orders.selectors import accounts_for_user, orders_for_user, positions_for_user
from orders.sync import order_sync
from processor.signals import EXIT_OF, Signal, SignalKind
from processor.signals import Position as HeldSide

AnyUser = AbstractBaseUser | AnonymousUser

EXIT_KIND = {PositionSide.LONG: EXIT_OF[HeldSide.LONG], PositionSide.SHORT: EXIT_OF[HeldSide.SHORT]}
ENTRY_KIND = {"LONG": SignalKind.ENTRY_LONG, "SHORT": SignalKind.ENTRY_SHORT}


class ManualRefused(ValueError):
    """The request cannot be carried out as asked (shown to the person as a form error)."""


@dataclass(frozen=True, slots=True)
class ManualOutcome:
    """What became of one manual action on one account."""

    action: str  # close, cancel, entry
    account_id: int
    target: str  # e.g. "position 12 LONG BTC-USD"
    outcome: str  # the signal outcome (placed, no_position, ...) or the order's status after a cancel
    client_order_id: str = ""
    detail: str = ""

    @property
    def done(self) -> bool:
        return self.outcome in ("placed", "CANCELED", "FILLED")

    def describe(self) -> str:
        text = f"{self.action} {self.target}: {self.outcome}"
        if self.client_order_id:
            text += f" ({self.client_order_id})"
        return f"{text}: {self.detail}" if self.detail else text

    def as_dict(self) -> dict[str, str | int | bool]:
        return {
            "action": self.action,
            "account": self.account_id,
            "target": self.target,
            "outcome": self.outcome,
            "client_order_id": self.client_order_id,
            "detail": self.detail,
            "done": self.done,
        }


@dataclass
class ManualDesk:
    """An executor and the brokers it trades through, for the manual actions of one request.

    Built from the same settings as the runtime's (`orders.startup`); its entry gate is
    the kill switch the composition root or the calling view hands in.
    """

    executor: TradeExecutor
    registry: BrokerRegistry

    async def close(self) -> None:
        await self.registry.close()


def manual_desk(*, entry_gate: EntryGate = _never_halted, config: ExecutorConfig | None = None) -> ManualDesk:
    from orders.services import broker_registry_from_settings
    from orders.startup import executor_config_from_settings

    registry = broker_registry_from_settings()
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=config or executor_config_from_settings(),
        entry_gate=entry_gate,
    )
    return ManualDesk(executor=executor, registry=registry)


def manual_signal(
    *, strategy_id: int, strategy_name: str, feed: str, symbol: str, kind: SignalKind, price: int, action: str
) -> Signal:
    """A signal a person (or a risk limit) made: its own output id, so it is never a strategy's duplicate."""
    now = time.time_ns()
    return Signal(
        strategy_id=strategy_id,
        strategy_name=strategy_name,
        feed=feed,
        symbol=symbol,
        kind=kind,
        price=price,
        emitted_ns=now,
        occurrence_ns=now,
        output_id=f"{action}-{uuid.uuid4().hex}"[:64],
    )


def _newest_price(instrument_id: int) -> int | None:
    from feeds.models import Tick

    return (
        Tick.objects.filter(instrument_id=instrument_id).order_by("-ts_event").values_list("price", flat=True).first()
    )


def _mode_for(account_id: int, strategy_id: int, broker: str) -> str:
    mode = TradeSetting.objects.filter(account_id=account_id, strategy_id=strategy_id).values_list("mode", flat=True)
    found = mode.first()
    if found:
        return str(found)
    if broker == PAPER:
        return PAPER
    raise ManualRefused("no trade setting says whether this account trades live or in the sandbox")


@dataclass(frozen=True, slots=True)
class ExitOrder:
    """A position's exit as one signal and one account's plan."""

    signal: Signal
    plan: TradePlan
    target: str


def exit_order_for(position: Position, *, action: str, price: int | None = None) -> ExitOrder:
    """The exit of `position` (instrument, account and strategy selected), as a signal on its one account."""
    if position.strategy_id is None:
        raise ManualRefused(f"position {position.pk} has no strategy any more: close it at the broker")
    instrument = position.instrument
    if price is None:
        price = _newest_price(instrument.pk)
    if price is None:
        # A market exit's price is only recorded on the intent; the entry price stands in.
        price = position.cost * fixed_from_decimal(Decimal(1)) // position.quantity if position.quantity else 0
    account = position.account
    plan = TradePlan(
        account_id=account.pk,
        owner_id=account.owner_id,
        broker=account.broker,
        mode=_mode_for(account.pk, position.strategy_id, account.broker),
        strategy_id=position.strategy_id,
        instrument_id=instrument.pk,
        venue_symbol=instrument.venue_symbol,
        tick_size=fixed_from_decimal(instrument.tick_size),
        lot_size=fixed_from_decimal(instrument.lot_size),
        multiplier=fixed_from_decimal(instrument.contract_multiplier),
        quantity=position.quantity,
        order_type="MARKET",
    )
    signal = manual_signal(
        strategy_id=position.strategy_id,
        strategy_name=position.strategy.name if position.strategy else "",
        feed=instrument.feed.name,
        symbol=instrument.venue_symbol,
        kind=EXIT_KIND[PositionSide(position.side)],
        price=max(price, 1),
        action=action,
    )
    return ExitOrder(signal=signal, plan=plan, target=f"position {position.pk} {position.side} {instrument.symbol}")


def _user_position(user: AnyUser, position_id: int) -> Position:
    return (
        positions_for_user(user, open_only=True)
        .select_related("strategy", "instrument__feed", "account")
        .get(pk=position_id)
    )


def _exit_for_user(user: AnyUser, position_id: int) -> ExitOrder:
    return exit_order_for(_user_position(user, position_id), action="manual-close")


async def position_close(*, user: AnyUser, position_id: int, desk: ManualDesk) -> ManualOutcome:
    """Close one of the user's open positions at market through the executor's exit flow."""
    order = await in_db_thread(_exit_for_user)(user, position_id)
    return await _run_exit(order, desk)


async def _run_exit(order: ExitOrder, desk: ManualDesk) -> ManualOutcome:
    outcome = await desk.executor.handle_plan(order.signal, order.plan)
    return ManualOutcome(
        action="close",
        account_id=order.plan.account_id,
        target=order.target,
        outcome=outcome,
        client_order_id=await in_db_thread(_outcome_order_id)(order.signal, order.plan.account_id),
        detail=await in_db_thread(_outcome_reason)(order.signal, order.plan.account_id),
    )


def _outcome_row(signal: Signal, account_id: int) -> tuple[str, str] | None:
    from orders.models import SignalOutcome
    from orders.plans import signal_key

    row = (
        SignalOutcome.objects.filter(signal_key=signal_key(signal), account_id=account_id)
        .values_list("client_order_id", "reason")
        .first()
    )
    return (str(row[0]), str(row[1])) if row else None


def _outcome_order_id(signal: Signal, account_id: int) -> str:
    row = _outcome_row(signal, account_id)
    return row[0] if row else ""


def _outcome_reason(signal: Signal, account_id: int) -> str:
    row = _outcome_row(signal, account_id)
    return row[1] if row else ""


def _flatten_targets(user: AnyUser, account_id: int) -> tuple[list[ExitOrder], list[str]]:
    account = accounts_for_user(user).get(pk=account_id)
    exits: list[ExitOrder] = []
    refused: list[str] = []
    positions = (
        Position.objects.filter(account=account, state=Position.State.OPEN)
        .select_related("strategy", "instrument__feed", "account")
        .order_by("pk")
    )
    for position in positions:
        try:
            exits.append(exit_order_for(position, action="manual-flatten"))
        except ManualRefused as exc:
            refused.append(f"position {position.pk}: {exc}")
    return exits, refused


def _working_entries(user: AnyUser, account_id: int) -> list[int]:
    return list(
        orders_for_user(user)
        .filter(account_id=account_id, intent=Intent.ENTRY)
        .exclude(status__in=TERMINAL_STATUSES)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


async def account_flatten(*, user: AnyUser, account_id: int, desk: ManualDesk) -> list[ManualOutcome]:
    """Close every open position of the user's account, then cancel its entries still working.

    Each close is its own signal on the executor (positions of different instruments
    close concurrently); an entry order that a close already cancelled is skipped.
    """
    import asyncio

    exits, refused = await in_db_thread(_flatten_targets)(user, account_id)
    results = list(await asyncio.gather(*(_run_exit(order, desk) for order in exits)))
    for order_id in await in_db_thread(_working_entries)(user, account_id):
        results.append(await order_cancel(user=user, order_id=order_id, desk=desk))
    results += [ManualOutcome("close", account_id, text.split(":")[0], "refused", detail=text) for text in refused]
    return results


def _cancel_target(user: AnyUser, order_id: int) -> tuple[Order, str, str]:
    order = orders_for_user(user).select_related("instrument", "account").get(pk=order_id)
    mode = _mode_for(order.account_id, order.strategy_id, order.account.broker) if order.strategy_id else PAPER
    return order, mode, order.instrument.venue_symbol


def _order_status(order_id: int) -> str:
    return str(Order.objects.values_list("status", flat=True).get(pk=order_id))


async def order_cancel(*, user: AnyUser, order_id: int, desk: ManualDesk) -> ManualOutcome:
    """Ask the broker to cancel one of the user's working orders; book its answer through the lifecycle."""
    order, mode, symbol = await in_db_thread(_cancel_target)(user, order_id)
    target = f"order {order.client_order_id}"

    def result(outcome: str, detail: str = "") -> ManualOutcome:
        return ManualOutcome("cancel", order.account_id, target, outcome, order.client_order_id, detail)

    if order.is_terminal:
        return result(order.status, "already ended: nothing to cancel")
    try:
        broker: Broker = desk.registry.broker_for(account_id=order.account_id, venue=order.account.broker, mode=mode)
    except BrokerNotConfigured as exc:
        return result("broker_not_configured", str(exc))
    try:
        await broker.cancel_order(
            client_order_id=order.client_order_id, exchange_order_id=order.exchange_order_id, symbol=symbol
        )
    except (OrderNotFound, BrokerRejected) as exc:
        detail = f"the broker refused the cancel ({exc}); its final state is booked"
    except BrokerUnavailable as exc:
        return result("unknown", f"the broker did not answer ({exc}); reconciliation settles it")
    else:
        detail = ""
    await order_sync(broker=broker, account_id=order.account_id, order=order, symbol=symbol)
    return result(await in_db_thread(_order_status)(order.pk), detail)


def parse_quantity(text: str) -> Decimal | None:
    """A positive quantity typed by a person, or None for the trade setting's own (blank)."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ManualRefused("quantity: not a number") from None
    if not value.is_finite() or value <= 0:
        raise ManualRefused("quantity: must be a positive number")
    if value.as_tuple().exponent < -12 or abs(value) >= Decimal(10) ** 18:  # type: ignore[operator]
        raise ManualRefused("quantity: at most 12 decimal places and below 10^18")
    return value


def _entry_plan(
    user: AnyUser, setting_id: int, instrument_id: int, side: str, quantity: Decimal | None
) -> tuple[Signal, TradePlan, str]:
    setting = (
        TradeSetting.objects.filter(account__in=accounts_for_user(user))
        .select_related("strategy", "account")
        .get(pk=setting_id)
    )
    if side not in ENTRY_KIND:
        raise ManualRefused("side: choose LONG or SHORT")
    if not setting.enabled:
        raise ManualRefused(f"{setting.strategy.name} on {setting.account.name} is disabled: enable it first")
    instrument = setting.strategy.instruments.select_related("feed").filter(pk=instrument_id).first()
    if instrument is None:
        raise ManualRefused(f"instrument: {setting.strategy.name} does not trade it")
    price = _newest_price(instrument.pk)
    if price is None:
        raise ManualRefused(f"no trade of {instrument.symbol} recorded yet: no price to size the entry on")
    signal = manual_signal(
        strategy_id=setting.strategy_id,
        strategy_name=setting.strategy.name,
        feed=instrument.feed.name,
        symbol=instrument.venue_symbol,
        kind=ENTRY_KIND[side],
        price=price,
        action="manual-entry",
    )
    plans = [plan for plan in plans_for_signal(signal) if plan.account_id == setting.account_id]
    if not plans:
        raise ManualRefused("no enabled trade setting of this strategy trades this instrument on the account")
    plan = replace(plans[0], order_type="MARKET")
    if quantity is not None:
        plan = replace(plan, quantity=round_to_step(fixed_from_decimal(quantity), plan.lot_size))
    target = f"{side} {fixed_to_decimal(plan.quantity)} {instrument.symbol} for {setting.strategy.name}"
    return signal, plan, target


async def manual_entry(
    *,
    user: AnyUser,
    trade_setting_id: int,
    instrument_id: int,
    side: str,
    quantity: Decimal | None,
    desk: ManualDesk,
) -> ManualOutcome:
    """Enter at market on one of the user's trade settings, through the executor's entry flow."""
    signal, plan, target = await in_db_thread(_entry_plan)(user, trade_setting_id, instrument_id, side, quantity)
    outcome = await desk.executor.handle_plan(signal, plan)
    return ManualOutcome(
        action="entry",
        account_id=plan.account_id,
        target=target,
        outcome=outcome,
        client_order_id=await in_db_thread(_outcome_order_id)(signal, plan.account_id),
        detail=await in_db_thread(_outcome_reason)(signal, plan.account_id),
    )
