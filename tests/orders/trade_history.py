"""Closed trades booked through the real lifecycle (intent, broker order, fills), with chosen
prices, fees and broker times: the history the trade and performance tests compute by hand."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime

from feeds.market import parse_fixed
from feeds.models import Instrument
from orders import lifecycle
from orders.brokers.base import BrokerFill, BrokerOrder
from orders.lifecycle import IntentSpec
from orders.models import Account, OrderStatus, Position
from processor.models import Strategy

_seq = itertools.count(1)


@dataclass(frozen=True)
class RoundTrip:
    """One trade: `quantity` entered at `entry` and closed at `exit` (decimal strings), fees per fill."""

    side: str  # LONG or SHORT
    quantity: str
    entry: str
    exit: str
    entry_fee: str
    exit_fee: str
    entry_at: datetime
    exit_at: datetime


def _ns(moment: datetime) -> int:
    return int(moment.replace(tzinfo=moment.tzinfo or UTC).timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _order(account: Account, strategy: Strategy | None, instrument: Instrument, spec: IntentSpec) -> str:
    exchange_id = f"x-{spec.client_order_id}"
    lifecycle.lifecycle_persist(
        broker_order=BrokerOrder(
            client_order_id=spec.client_order_id,
            exchange_order_id=exchange_id,
            symbol=instrument.venue_symbol,
            side=spec.side,
            order_type="MARKET",
            quantity=spec.quantity,
            price=None,
            status=OrderStatus.SUBMITTED,
        )
    )
    return exchange_id


def _fill(
    account: Account,
    exchange_id: str,
    symbol: str,
    side: str,
    quantity: int,
    price: str,
    fee: str,
    at: datetime,
    *,
    via_reconciliation: bool = False,
) -> None:
    assert lifecycle.lifecycle_apply_fill(
        account_id=account.pk,
        via_reconciliation=via_reconciliation,
        fill=BrokerFill(
            exchange_trade_id=f"t-{exchange_id}",
            exchange_order_id=exchange_id,
            symbol=symbol,
            side=side,
            quantity=quantity,
            price=parse_fixed(price),
            fee=parse_fixed(fee),
            ts_event=_ns(at),
        ),
    )


def book_round_trip(
    account: Account,
    strategy: Strategy | None,
    instrument: Instrument,
    trip: RoundTrip,
    *,
    exit_via_reconciliation: bool = False,
) -> Position:
    """Enter and close one position with market orders filled once each; return the closed position.

    `exit_via_reconciliation`: the exit fill is booked as reconciliation found it.
    """
    n = next(_seq)
    quantity = parse_fixed(trip.quantity)
    entry_side, exit_side = ("BUY", "SELL") if trip.side == "LONG" else ("SELL", "BUY")
    base = IntentSpec(
        client_order_id=f"hist-{account.pk}-{n}-e",
        account_id=account.pk,
        strategy_id=strategy.pk if strategy else None,
        instrument_id=instrument.pk,
        intent="ENTRY",
        position_side=trip.side,
        side=entry_side,
        order_type="MARKET",
        quantity=quantity,
        price=parse_fixed(trip.entry),
        # notional x 2 covers the fill's cost and fee whatever the multiplier-1 prices chosen
        reserve=2 * quantity * parse_fixed(trip.entry) // 10**12 + parse_fixed(trip.entry_fee),
        signal_kind=f"ENTRY_{trip.side}",
    )
    lifecycle.intent_create(spec=base)
    entry_id = _order(account, strategy, instrument, base)
    _fill(account, entry_id, instrument.venue_symbol, entry_side, quantity, trip.entry, trip.entry_fee, trip.entry_at)
    exit_spec = IntentSpec(
        **{
            **base.__dict__,
            "client_order_id": f"hist-{account.pk}-{n}-x",
            "intent": "EXIT",
            "side": exit_side,
            "price": parse_fixed(trip.exit),
            "reserve": 0,
            "signal_kind": f"EXIT_{trip.side}",
        }
    )
    sizing = lifecycle.exit_intent_create(spec=exit_spec)
    assert sizing.intent is not None, sizing
    exit_id = _order(account, strategy, instrument, exit_spec)
    _fill(
        account,
        exit_id,
        instrument.venue_symbol,
        exit_side,
        quantity,
        trip.exit,
        trip.exit_fee,
        trip.exit_at,
        via_reconciliation=exit_via_reconciliation,
    )
    return Position.objects.get(orders__client_order_id=base.client_order_id)
