"""Net exposure per (account, symbol): what the site's open positions add up to against the broker's position.

Reconciliation of orders and fills can converge while the exposure does not: an exit
that oversold, a fill booked on a closed position, a trade made outside the site. The
net of the account's open positions (long positive, short negative) per venue symbol
is compared with the broker's own position; only a symbol with no working order and
no pending intent is compared, and only under its entry lease, so an order in flight
is never mistaken for a difference.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from feeds.market import fixed_to_str
from feeds.models import Instrument
from orders.brokers.base import BrokerPosition
from orders.models import Order, OrderIntent, Position
from orders.models.lifecycle import TERMINAL_STATUSES, PositionSide


@dataclass(frozen=True)
class SymbolBook:
    """The site's side of one symbol of one account."""

    symbol: str
    instrument_ids: tuple[int, ...]
    net: int  # signed, fixed point
    busy: bool  # a working order or a pending intent: the exposure may move at any moment


@dataclass(frozen=True)
class ExposureMismatch:
    symbol: str
    site: int
    broker: int

    def describe(self) -> str:
        return f"{self.symbol}: site net {fixed_to_str(self.site)}, broker net {fixed_to_str(self.broker)}"


def site_exposure(account_id: int) -> dict[str, SymbolBook]:
    """The account's net open position per venue symbol, over every instrument it ever traded."""
    instrument_ids: set[int] = set(
        Position.objects.filter(account_id=account_id).values_list("instrument_id", flat=True).distinct()
    )
    instrument_ids |= set(
        OrderIntent.objects.filter(account_id=account_id).values_list("instrument_id", flat=True).distinct()
    )
    symbol_of = dict(Instrument.objects.filter(pk__in=instrument_ids).values_list("pk", "venue_symbol"))
    net: dict[int, int] = {}
    for side, instrument_id, quantity in Position.objects.filter(
        account_id=account_id, state=Position.State.OPEN
    ).values_list("side", "instrument_id", "quantity"):
        net[instrument_id] = net.get(instrument_id, 0) + (quantity if side == PositionSide.LONG else -quantity)
    busy = set(
        Order.objects.filter(account_id=account_id).exclude(status__in=TERMINAL_STATUSES).values_list("instrument_id", flat=True)
    )
    busy |= set(
        OrderIntent.objects.filter(account_id=account_id, state=OrderIntent.State.PENDING).values_list(
            "instrument_id", flat=True
        )
    )
    books: dict[str, SymbolBook] = {}
    for instrument_id, symbol in sorted(symbol_of.items()):
        book = books.get(symbol)
        books[symbol] = SymbolBook(
            symbol=symbol,
            instrument_ids=((book.instrument_ids if book else ()) + (instrument_id,)),
            net=(book.net if book else 0) + net.get(instrument_id, 0),
            busy=(book.busy if book else False) or instrument_id in busy,
        )
    return books


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
