"""The closed-trade history: which positions are trades, and each one's figures as shown.

A trade is a position that closed after at least one entry fill (a position whose entry
was cancelled unfilled is not one). Its figures are the ones the fill handlers keep on
the position (orders.trade_figures); prices here are derived from them exactly.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta, tzinfo
from decimal import Decimal, localcontext

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from core.fixed_point import fixed_to_str
from dashboard.times import format_moment
from orders.models import Account, Position
from orders.trade_figures import entry_price, exit_price

User = AbstractBaseUser | AnonymousUser
PERCENT_PLACES = Decimal("0.01")
CSV_CHUNK = 2000


# What a trade row shows; the rest of each joined row is never loaded.
TRADE_COLUMNS = (
    "side",
    "state",
    "realized_pnl",
    "fees",
    "entry_quantity",
    "entry_notional",
    "exit_quantity",
    "exit_notional",
    "entry_at",
    "exit_at",
    "exit_reason",
    "account__name",
    "strategy__name",
    "instrument__symbol",
    "instrument__contract_multiplier",
    "instrument__feed__name",
)


def closed_trades_for_user(user: User) -> QuerySet[Position]:
    """The user's closed trades, newest exit first.

    A closed position with an exit time had exit fills, so entry fills before them. The
    user's account ids are read first (one small query) so that the trades are selected
    by the (account, state, exit time) index, in exit order, rather than through a join.
    """
    if not user.is_authenticated:
        return Position.objects.none()
    account_ids = list(Account.objects.filter(owner_id=user.pk).values_list("pk", flat=True))
    return (
        Position.objects.filter(account_id__in=account_ids, state=Position.State.CLOSED, exit_at__isnull=False)
        .select_related("account", "strategy", "instrument__feed")
        .only(*TRADE_COLUMNS)
        .order_by("-exit_at", "-id")
    )


def _duration(delta: timedelta | None) -> str:
    if delta is None:
        return "–"
    seconds = int(delta.total_seconds())
    days, rest = divmod(abs(seconds), 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{hours}h {minutes:02d}m {seconds:02d}s" if hours else f"{minutes}m {seconds:02d}s"
    return f"{days}d {text}" if days else text


@dataclass(frozen=True)
class TradeRow:
    """One closed trade as the page, the CSV and the API show it (money as exact decimal strings)."""

    position: Position
    entry_price: Decimal | None
    exit_price: Decimal | None
    pnl_percent: Decimal | None
    duration: timedelta | None

    @property
    def quantity(self) -> str:
        return fixed_to_str(self.position.entry_quantity)

    @property
    def pnl(self) -> str:
        return fixed_to_str(self.position.realized_pnl)

    @property
    def gross_pnl(self) -> str:
        return fixed_to_str(self.position.realized_pnl + self.position.fees)

    @property
    def fees(self) -> str:
        return fixed_to_str(self.position.fees)

    @property
    def pnl_sign(self) -> int:
        return (self.position.realized_pnl > 0) - (self.position.realized_pnl < 0)

    @property
    def duration_text(self) -> str:
        return _duration(self.duration)


def trade_row(position: Position) -> TradeRow:
    """The shown figures of one closed trade (its instrument loaded)."""
    duration = None
    if position.entry_at is not None and position.exit_at is not None:
        duration = position.exit_at - position.entry_at
    percent = None
    if position.entry_notional:
        with localcontext() as context:
            context.prec = 60
            percent = (Decimal(position.realized_pnl) * 100 / Decimal(position.entry_notional)).quantize(PERCENT_PLACES)
    return TradeRow(
        position=position,
        entry_price=entry_price(position),
        exit_price=exit_price(position),
        pnl_percent=percent,
        duration=duration,
    )


def trade_rows(positions: Iterable[Position]) -> list[TradeRow]:
    return [trade_row(position) for position in positions]


CSV_HEADER = [
    "trade_id",
    "account",
    "strategy",
    "feed",
    "symbol",
    "side",
    "entry_time",
    "entry_price",
    "exit_time",
    "exit_price",
    "quantity",
    "duration_s",
    "gross_pnl",
    "fees",
    "pnl",
    "pnl_percent",
    "exit_reason",
]


class _Echo:
    def write(self, value: str) -> str:
        return value


def trades_csv_lines(trades: QuerySet[Position], zone: tzinfo) -> Iterator[str]:
    """The CSV of `trades`, one line at a time (streamed: the whole history never sits in memory)."""
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_HEADER)
    for position in trades.iterator(chunk_size=CSV_CHUNK):
        row = trade_row(position)
        yield writer.writerow(
            [
                position.pk,
                position.account.name,
                position.strategy.name if position.strategy else "",
                position.instrument.feed.name,
                position.instrument.symbol,
                position.side,
                format_moment(position.entry_at, zone),
                row.entry_price if row.entry_price is not None else "",
                format_moment(position.exit_at, zone),
                row.exit_price if row.exit_price is not None else "",
                row.quantity,
                "" if row.duration is None else int(row.duration.total_seconds()),
                row.gross_pnl,
                row.fees,
                row.pnl,
                "" if row.pnl_percent is None else row.pnl_percent,
                position.exit_reason,
            ]
        )
