"""Net exposure per (account, symbol): what the site's open positions add up to against the broker's position.

Reconciliation of orders and fills can converge while the exposure does not: an exit
that oversold, a fill booked on a closed position, a trade made outside the site. The
net of the account's open positions (long positive, short negative) per venue symbol
is compared with the broker's own position; only a symbol with no working order and
no pending intent is compared, and only under its entry lease, so an order in flight
is never mistaken for a difference. Accounts that trade through one venue key are
compared together: the venue holds one position for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.fixed_point import fixed_to_str
from feeds.models import Instrument
from orders.brokers.base import BrokerPosition
from orders.models import Order, OrderIntent, Position
from orders.models.lifecycle import TERMINAL_STATUSES, PositionSide


@dataclass(frozen=True)
class SymbolBook:
    """The site's side of one symbol of one account."""

    symbol: str
    entries: tuple[tuple[int, int], ...]  # (account, instrument) pairs trading this symbol
    net: int  # signed, fixed point
    busy: bool  # a working order or a pending intent: the exposure may move at any moment


@dataclass(frozen=True)
class ExposureMismatch:
    symbol: str
    site: int
    broker: int

    def describe(self) -> str:
        return f"{self.symbol}: site net {fixed_to_str(self.site)}, broker net {fixed_to_str(self.broker)}"


def site_exposure(account_ids: Sequence[int]) -> dict[str, SymbolBook]:
    """The combined net open position of `account_ids` per venue symbol, over every instrument they traded.

    Several accounts are combined when they trade through one venue key: the venue
    reports one position for all of them.
    """
    entries: set[tuple[int, int]] = set(
        Position.objects.filter(account_id__in=account_ids).values_list("account_id", "instrument_id").distinct()
    )
    entries |= set(
        OrderIntent.objects.filter(account_id__in=account_ids).values_list("account_id", "instrument_id").distinct()
    )
    symbol_of = dict(Instrument.objects.filter(pk__in={i for _, i in entries}).values_list("pk", "venue_symbol"))
    net: dict[str, int] = {}
    for side, instrument_id, quantity in Position.objects.filter(
        account_id__in=account_ids, state=Position.State.OPEN
    ).values_list("side", "instrument_id", "quantity"):
        symbol = symbol_of[instrument_id]
        net[symbol] = net.get(symbol, 0) + (quantity if side == PositionSide.LONG else -quantity)
    busy = set(
        Order.objects.filter(account_id__in=account_ids)
        .exclude(status__in=TERMINAL_STATUSES)
        .values_list("account_id", "instrument_id")
    )
    busy |= set(
        OrderIntent.objects.filter(account_id__in=account_ids, state=OrderIntent.State.PENDING).values_list(
            "account_id", "instrument_id"
        )
    )
    by_symbol: dict[str, list[tuple[int, int]]] = {}
    for entry in sorted(entries):
        by_symbol.setdefault(symbol_of[entry[1]], []).append(entry)
    return {
        symbol: SymbolBook(
            symbol=symbol,
            entries=tuple(pairs),
            net=net.get(symbol, 0),
            busy=any(pair in busy for pair in pairs),
        )
        for symbol, pairs in sorted(by_symbol.items())
    }


def exposure_diff(
    site: dict[str, SymbolBook], broker: Iterable[BrokerPosition], *, compared: set[str]
) -> list[ExposureMismatch]:
    """Return the symbols of `compared` whose site net differs from the broker's, by symbol. Pure.

    A broker position in a symbol the site never traded is compared too (the site's
    net there is zero): exposure nobody on the site asked for is exactly what an
    operator must see.
    """
    at_broker: dict[str, int] = {}
    for position in broker:
        at_broker[position.symbol] = at_broker.get(position.symbol, 0) + position.quantity
    mismatches = []
    for symbol in sorted(compared | {s for s in at_broker if s not in site}):
        ours = site[symbol].net if symbol in site else 0
        theirs = at_broker.get(symbol, 0)
        if ours != theirs:
            mismatches.append(ExposureMismatch(symbol, ours, theirs))
    return mismatches
