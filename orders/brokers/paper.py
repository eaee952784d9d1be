"""The paper broker: a simulated exchange with its own book (orders.models.paper).

Orders rest in the paper book and fill against live trade ticks: a market order at
the tick's price, a limit order at its limit once a tick trades through it, each fill
at most the tick's volume (so large orders fill partially over several ticks), with a
taker or maker fee. Duplicate client order ids are refused like a real venue does.
The book lives in the database so it outlives a runtime restart and is one exchange
for every process; the site's own order tables are never read here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Sum

from feeds.market import MarketData
from orders.brokers.base import (
    BrokerFill,
    BrokerOrder,
    BrokerPosition,
    BrokerRejected,
    DuplicateClientOrderId,
    OrderNotFound,
    OrderRequest,
)
from orders.brokers.kinds import PAPER, BrokerKind, register_broker
from orders.db import in_db_thread
from orders.models.lifecycle import OrderSide, OrderStatus, OrderType
from orders.models.paper import PaperFill, PaperOrder
from orders.money import bps_of, notional

OPEN_STATUSES = (OrderStatus.NEW, OrderStatus.PARTIALLY_FILLED)
Clock = Callable[[], int]


@dataclass(frozen=True, slots=True)
class PaperFees:
    taker_bps: int = 4
    maker_bps: int = 2


def match_quantity(
    *, side: str, order_type: str, limit: int | None, remaining: int, tick: MarketData
) -> tuple[int, int]:
    """Return (quantity, price) that `tick` fills of a resting order; (0, 0) when it does not trade through.

    Pure: the matching rule of the paper exchange.
    """
    if remaining <= 0 or tick.volume <= 0:
        return 0, 0
    if order_type == OrderType.MARKET:
        return min(remaining, tick.volume), tick.price
    assert limit is not None
    crosses = tick.price <= limit if side == OrderSide.BUY else tick.price >= limit
    return (min(remaining, tick.volume), limit) if crosses else (0, 0)


def _report(order: PaperOrder) -> BrokerOrder:
    return BrokerOrder(
        client_order_id=order.client_order_id,
        exchange_order_id=f"P{order.pk}",
        symbol=order.symbol,
        side=order.side,
        order_type=order.order_type,
        quantity=order.quantity,
        price=order.price,
        status=OrderStatus(order.status),
        filled_quantity=order.filled_quantity,
    )


def _fill_report(fill: PaperFill, order: PaperOrder) -> BrokerFill:
    return BrokerFill(
        exchange_trade_id=f"PT{fill.pk}",
        exchange_order_id=f"P{order.pk}",
        symbol=order.symbol,
        side=order.side,
        quantity=fill.quantity,
        price=fill.price,
        fee=fill.fee,
        ts_event=fill.ts_event,
    )


class PaperExchange:
    """Synchronous access to the paper book of one paper account."""

    def __init__(self, *, account_key: str, clock_ns: Clock = time.time_ns) -> None:
        self.account_key = account_key
        self._clock_ns = clock_ns

    def place(self, request: OrderRequest) -> BrokerOrder:
        if request.quantity <= 0:
            raise BrokerRejected("quantity must be positive")
        if request.order_type == OrderType.LIMIT and not request.price:
            raise BrokerRejected("a limit order needs a price")
        now = self._clock_ns()
        try:
            with transaction.atomic():
                order = PaperOrder.objects.create(
                    account_key=self.account_key,
                    client_order_id=request.client_order_id,
                    symbol=request.symbol,
                    side=request.side,
                    order_type=request.order_type,
                    quantity=request.quantity,
                    price=request.price if request.order_type == OrderType.LIMIT else None,
                    status=OrderStatus.NEW,
                    created_ns=now,
                    updated_ns=now,
                )
        except IntegrityError:
            raise DuplicateClientOrderId(request.client_order_id) from None
        return _report(order)

    def get(self, client_order_id: str) -> BrokerOrder:
        order = PaperOrder.objects.filter(account_key=self.account_key, client_order_id=client_order_id).first()
        if order is None:
            raise OrderNotFound(client_order_id)
        return _report(order)

    def cancel(self, client_order_id: str) -> BrokerOrder:
        with transaction.atomic():
            order = (
                PaperOrder.objects.select_for_update()
                .filter(account_key=self.account_key, client_order_id=client_order_id)
                .first()
            )
            if order is None:
                raise OrderNotFound(client_order_id)
            if order.status in OPEN_STATUSES:
                order.status = OrderStatus.CANCELED
                order.updated_ns = self._clock_ns()
                order.save(update_fields=["status", "updated_ns"])
        return _report(order)

    def open_orders(self) -> list[BrokerOrder]:
        orders = PaperOrder.objects.filter(account_key=self.account_key, status__in=OPEN_STATUSES).order_by("pk")
        return [_report(order) for order in orders]

    def fills(self, since_ns: int) -> list[BrokerFill]:
        fills = (
            PaperFill.objects.filter(order__account_key=self.account_key, ts_event__gte=since_ns)
            .select_related("order")
            .order_by("pk")
        )
        return [_fill_report(fill, fill.order) for fill in fills]

    def positions(self) -> list[BrokerPosition]:
        """The net of this account's paper fills per symbol: bought minus sold."""
        net: dict[str, int] = {}
        rows = (
            PaperFill.objects.filter(order__account_key=self.account_key)
            .values("order__symbol", "order__side")
            .annotate(total=Sum("quantity"))
        )
        for row in rows:
            sign = 1 if row["order__side"] == OrderSide.BUY else -1
            net[row["order__symbol"]] = net.get(row["order__symbol"], 0) + sign * int(row["total"] or 0)
        return [BrokerPosition(symbol, quantity) for symbol, quantity in sorted(net.items()) if quantity]


_PAPER_COLUMNS = (
    "account_key",
    "client_order_id",
    "symbol",
    "side",
    "order_type",
    "quantity",
    "price",
    "status",
    "filled_quantity",
    "filled_notional",
    "created_ns",
    "updated_ns",
)


def paper_place_many(orders: Sequence[tuple[str, OrderRequest, int]]) -> list[BrokerOrder | Exception]:
    """Place several (account key, request, created ns) orders in the paper book in one statement.

    Per order the answer is PaperExchange.place's: the order as booked, or the refusal
    (BrokerRejected for a malformed request, DuplicateClientOrderId for a client id the
    account already used), in the order given.
    """
    from orders.rows import insert_rows

    answers: list[BrokerOrder | Exception | None] = []
    rows = []
    for account_key, request, now in orders:
        if request.quantity <= 0:
            answers.append(BrokerRejected("quantity must be positive"))
        elif request.order_type == OrderType.LIMIT and not request.price:
            answers.append(BrokerRejected("a limit order needs a price"))
        else:
            answers.append(None)
            price = request.price if request.order_type == OrderType.LIMIT else None
            rows.append(
                (
                    account_key,
                    request.client_order_id,
                    request.symbol,
                    request.side,
                    request.order_type,
                    request.quantity,
                    price,
                    OrderStatus.NEW,
                    0,
                    0,
                    now,
                    now,
                )
            )
    booked = {
        (account_key, client_order_id): pk
        for pk, account_key, client_order_id in insert_rows(
            PaperOrder,
            _PAPER_COLUMNS,
            rows,
            suffix="ON CONFLICT (account_key, client_order_id) DO NOTHING",
            returning=("id", "account_key", "client_order_id"),
        )
    }
    result: list[BrokerOrder | Exception] = []
    for (account_key, request, _), answer in zip(orders, answers):
        if answer is not None:
            result.append(answer)
            continue
        pk = booked.get((account_key, request.client_order_id))
        if pk is None:
            result.append(DuplicateClientOrderId(request.client_order_id))
            continue
        result.append(
            BrokerOrder(
                client_order_id=request.client_order_id,
                exchange_order_id=f"P{pk}",
                symbol=request.symbol,
                side=request.side,
                order_type=request.order_type,
                quantity=request.quantity,
                price=request.price if request.order_type == OrderType.LIMIT else None,
                status=OrderStatus.NEW,
                filled_quantity=0,
            )
        )
    return result


def paper_match(ticks: Sequence[MarketData], *, fees: PaperFees) -> list[tuple[str, BrokerFill]]:
    """Fill resting paper orders of every paper account against `ticks`; return (account_key, fill) pairs.

    One transaction; the open orders of the ticks' symbols are row-locked so two
    processes matching at once cannot fill the same remaining quantity twice.
    """
    symbols = {tick.symbol for tick in ticks}
    produced: list[tuple[str, BrokerFill]] = []
    with transaction.atomic():
        orders = list(
            PaperOrder.objects.select_for_update().filter(symbol__in=symbols, status__in=OPEN_STATUSES).order_by("pk")
        )
        if not orders:
            return produced
        for tick in ticks:
            for order in orders:
                if order.symbol != tick.symbol or order.status not in OPEN_STATUSES or tick.ts_recv < order.created_ns:
                    continue
                quantity, price = match_quantity(
                    side=order.side,
                    order_type=order.order_type,
                    limit=order.price,
                    remaining=order.quantity - order.filled_quantity,
                    tick=tick,
                )
                if not quantity:
                    continue
                value = notional(quantity, price)
                fee_bps = fees.taker_bps if order.order_type == OrderType.MARKET else fees.maker_bps
                fill = PaperFill.objects.create(
                    order=order, quantity=quantity, price=price, fee=bps_of(value, fee_bps), ts_event=tick.ts_recv
                )
                order.filled_quantity += quantity
                order.filled_notional += value
                order.status = (
                    OrderStatus.FILLED if order.filled_quantity == order.quantity else OrderStatus.PARTIALLY_FILLED
                )
                order.updated_ns = tick.ts_recv
                order.save(update_fields=["filled_quantity", "filled_notional", "status", "updated_ns"])
                produced.append((order.account_key, _fill_report(fill, order)))
    return produced


def paper_open_symbols() -> set[str]:
    return set(PaperOrder.objects.filter(status__in=OPEN_STATUSES).values_list("symbol", flat=True).distinct())


class PaperBroker:
    """The async Broker over one paper account, with an injected acknowledgement latency."""

    name = PAPER

    def __init__(
        self,
        *,
        account_key: str,
        latency_s: float = 0.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_place: Callable[[str], None] | None = None,
    ) -> None:
        self.exchange = PaperExchange(account_key=account_key)
        self._latency_s = latency_s
        self._sleep = sleep
        self._on_place = on_place

    async def _latency(self) -> None:
        if self._latency_s:
            await self._sleep(self._latency_s)

    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        await self._latency()
        order = await in_db_thread(self.exchange.place)(request)
        if self._on_place is not None:
            self._on_place(request.symbol)
        return order

    @staticmethod
    async def place_batch(items: Sequence[tuple[PaperBroker, OrderRequest]]) -> list[BrokerOrder | Exception]:
        """place_order for orders of several paper accounts at once: one acknowledgement wait, one statement.

        Returns, per item in order, the acknowledged order or the exception place_order
        would have raised for it. A subclass that places differently (its own
        place_order) is asked one order at a time.
        """
        answers: dict[int, BrokerOrder | Exception] = {}
        booked = [i for i, (broker, _) in enumerate(items) if type(broker).place_order is PaperBroker.place_order]
        others = [i for i in range(len(items)) if i not in set(booked)]

        async def one(i: int) -> None:
            broker, request = items[i]
            try:
                answers[i] = await broker.place_order(request)
            except Exception as exc:
                answers[i] = exc

        async def together() -> None:
            latency_s = max(items[i][0]._latency_s for i in booked)
            if latency_s:
                await items[booked[0]][0]._sleep(latency_s)
            placed = await in_db_thread(paper_place_many)(
                [(items[i][0].exchange.account_key, items[i][1], items[i][0].exchange._clock_ns()) for i in booked]
            )
            for i, answer in zip(booked, placed):
                broker, request = items[i]
                if broker._on_place is not None and isinstance(answer, BrokerOrder):
                    broker._on_place(request.symbol)
                answers[i] = answer

        await asyncio.gather(*([together()] if booked else []), *(one(i) for i in others))
        return [answers[i] for i in range(len(items))]

    @staticmethod
    def book_on_db_thread(
        items: Sequence[tuple[PaperBroker, OrderRequest]],
    ) -> Callable[[], list[BrokerOrder | Exception]] | None:
        """place_batch's booking as a function for a database thread, or None where place_batch must be awaited.

        The paper book is this site's database: a caller already on a database thread
        books there and goes on with its own work on the same thread (the executor
        persists the lifecycle right after the book commits). None when an
        acknowledgement latency is configured or a broker places differently (its own
        place_order or place_batch). Each answer is place_batch's; call `booked` on the event loop after.
        """
        if any(
            type(broker).place_order is not PaperBroker.place_order
            or type(broker).place_batch is not PaperBroker.place_batch
            or broker._latency_s
            for broker, _ in items
        ):
            return None
        orders = [(broker.exchange.account_key, request, broker.exchange._clock_ns()) for broker, request in items]
        return lambda: paper_place_many(orders)

    @staticmethod
    def booked(items: Sequence[tuple[PaperBroker, OrderRequest]], answers: Sequence[object]) -> None:
        """Tell each broker's placement listener about the orders `book_on_db_thread` booked (on the event loop)."""
        for (broker, request), answer in zip(items, answers):
            if broker._on_place is not None and isinstance(answer, BrokerOrder):
                broker._on_place(request.symbol)

    async def cancel_order(self, *, client_order_id: str, exchange_order_id: str, symbol: str) -> BrokerOrder:
        await self._latency()
        return await in_db_thread(self.exchange.cancel)(client_order_id)

    async def fetch_order(self, *, client_order_id: str, symbol: str) -> BrokerOrder:
        return await in_db_thread(self.exchange.get)(client_order_id)

    async def open_orders(self, *, symbols: Sequence[str]) -> list[BrokerOrder]:
        return await in_db_thread(self.exchange.open_orders)()

    async def fills(self, *, symbols: Sequence[str], since_ns: int) -> list[BrokerFill]:
        return await in_db_thread(self.exchange.fills)(since_ns)

    async def positions(self) -> list[BrokerPosition]:
        return await in_db_thread(self.exchange.positions)()

    async def close(self) -> None:
        return None


# Built by BrokerRegistry itself, one per account: each paper account keeps its own book.
KIND = register_broker(BrokerKind(PAPER, "Paper (simulated exchange)"))
