"""A fake Dzengi venue: the websocket API on `/connect` and REST aggTrades/exchangeInfo, one port.

It speaks the documented protocol: every websocket message is an envelope
`{destination, correlationId, payload}`. `trades.subscribe` with `{"symbols": [...]}` is
answered on its correlationId, after which trades arrive as

    {"status":"OK","destination":"internal.trade","payload":{"price":11400.95,"size":0.058,
     "id":1616651347,"ts":1596625079952,"symbol":"BTC/USD","orderId":"..","clientOrderId":"..",
     "buyer":true}}

`ping` is answered on its correlationId, and a connection that sends no `ping` within
`ping_deadline_s` (30 s at the venue) is closed, as the venue does. Trades are stamped
with the wall-clock millisecond at which they are released and served afterwards by
`GET /api/v1/aggTrades` (startTime/endTime inclusive and less than one hour apart,
limit <= 1000, oldest first, no id cursor); `GET /api/v1/exchangeInfo` lists the tape's
symbols. An unknown symbol gets `{"code":-1128,"msg":"Invalid symbol: .."}` with HTTP 400.

Fault knobs: `close_connections()`, `go_silent()` (no data; pings still answered),
`go_half_open()` (no data, nothing read: no pong at either level), `inject(frame)` (a raw
frame sent in order between the trades to every subscriber), `refuse_connections(True)`
(HTTP 503 at the handshake), `rest_down(True)` (HTTP 503 on REST).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from http import HTTPStatus
from typing import Any, ClassVar

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Response

from tests.fakes.venue_server import FakeVenueServer, VenueStats, json_response, json_text_response

MAX_WINDOW_MS = 3_600_000
MAX_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class TapeTrade:
    symbol: str  # "BTC/USD"
    trade_id: int  # `id` on the socket, `a` over REST; increasing per symbol
    price: str  # JSON number text
    size: str
    buyer: bool  # the taker bought


@dataclass(frozen=True, slots=True)
class ExecutedTrade:
    trade: TapeTrade
    ts_ms: int


@dataclass(frozen=True, slots=True)
class _Outgoing:
    symbol: str  # whose subscribers get it
    message: str | bytes


def make_tape(
    count: int, symbols: Sequence[str] = ("BTC/USD", "ETH/USD"), *, seed: int = 11, first_id: int = 1_616_651_347
) -> list[TapeTrade]:
    """Return `count` trades spread over `symbols`, with exact prices and sizes."""
    rng = random.Random(seed)
    ticks = {symbol: 1_140_095 + 10_000 * n for n, symbol in enumerate(symbols)}
    next_id = dict.fromkeys(symbols, first_id)
    tape = []
    for _ in range(count):
        symbol = rng.choice(symbols)
        ticks[symbol] = max(1, ticks[symbol] + rng.randint(-5, 5))
        price = Decimal(ticks[symbol]).scaleb(-2)
        size = Decimal(rng.randint(1, 50_000)).scaleb(-3)
        tape.append(TapeTrade(symbol, next_id[symbol], f"{price:f}", f"{size:f}", rng.random() < 0.5))
        next_id[symbol] += 1
    return tape


def trade_frame(trade: TapeTrade, ts_ms: int) -> str:
    # Written by hand so the numbers keep their exact text.
    return (
        f'{{"status":"OK","destination":"internal.trade","payload":{{"price":{trade.price},"size":{trade.size},'
        f'"id":{trade.trade_id},"ts":{ts_ms},"symbol":{json.dumps(trade.symbol)},'
        f'"orderId":"00a02503-0079-54c4-0000-{trade.trade_id:012d}",'
        f'"clientOrderId":"00a02503-0079-54c4-0000-{trade.trade_id + 1:012d}","buyer":{json.dumps(trade.buyer)}}}}}'
    )


@dataclass(eq=False)
class _Subscriber:
    connection: ServerConnection
    symbols: set[str] = field(default_factory=set)
    cursor: int = 0
    silent: bool = False
    last_ping: float = field(default_factory=time.monotonic)


@dataclass
class FakeDzengiStats(VenueStats):
    closed_for_no_ping: int = 0
    subscribe_messages: int = 0
    pings: int = 0
    injected_frames: int = 0


class FakeDzengi(FakeVenueServer[_Subscriber]):
    """The fake venue. Start with `async with`, then `release(n)`."""

    stream_path = "/connect"
    rest_prefix = "/api/"
    rest_down_body: ClassVar[dict[str, Any]] = {"code": -1000, "msg": "Internal error"}
    stats: FakeDzengiStats

    def __init__(
        self,
        tape: Sequence[TapeTrade] = (),
        *,
        host: str = "127.0.0.1",
        ping_deadline_s: float | None = 30.0,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        super().__init__(host=host)
        self.tape = list(tape)
        self.executed: list[ExecutedTrade] = []
        self._outbox: list[_Outgoing] = []
        self._by_symbol: dict[str, list[ExecutedTrade]] = {}
        self._ping_deadline_s = ping_deadline_s
        self._clock_ms = clock_ms
        self._released = asyncio.Event()
        self.rest_queries: list[dict[str, str]] = []
        self.stats = FakeDzengiStats()

    def _serve_options(self) -> dict[str, Any]:
        # The venue relies on the client's pings.
        return {"ping_interval": None, "max_queue": None, "compression": None, "close_timeout": 1}

    @property
    def finished(self) -> bool:
        return len(self.executed) == len(self.tape)

    # --- the market ------------------------------------------------------------------

    def release(self, count: int) -> None:
        """Execute the next `count` trades of the tape now."""
        ts_ms = self._clock_ms()
        for trade in self.tape[len(self.executed) : len(self.executed) + count]:
            executed = ExecutedTrade(trade, ts_ms)
            self.executed.append(executed)
            self._by_symbol.setdefault(trade.symbol, []).append(executed)
            self._outbox.append(_Outgoing(trade.symbol, trade_frame(trade, ts_ms)))
        self._wake()

    def inject(self, frame: str | bytes, *, symbol: str = "BTC/USD") -> None:
        """Send `frame` as it is, after the trades released so far and before the next ones."""
        self._outbox.append(_Outgoing(symbol, frame))
        self.stats.injected_frames += 1
        self._wake()

    def _wake(self) -> None:
        self._released.set()
        self._released = asyncio.Event()

    # --- fault knobs -----------------------------------------------------------------

    def go_silent(self) -> None:
        for sub in self._subscribers:
            sub.silent = True

    def go_half_open(self) -> None:
        for sub in self._subscribers:
            sub.silent = True
            sub.connection.transport.pause_reading()

    # --- websocket -------------------------------------------------------------------

    def _open(self, connection: ServerConnection) -> tuple[_Subscriber, list[asyncio.Task[None]]]:
        sub = _Subscriber(connection, cursor=len(self._outbox))
        tasks = [asyncio.create_task(self._send_loop(sub))]
        if self._ping_deadline_s is not None:
            tasks.append(asyncio.create_task(self._ping_watch(sub, self._ping_deadline_s)))
        return sub, tasks

    async def _ping_watch(self, sub: _Subscriber, deadline_s: float) -> None:
        while True:
            await asyncio.sleep(max(0.0, sub.last_ping + deadline_s - time.monotonic()))
            if time.monotonic() - sub.last_ping >= deadline_s:
                self.stats.closed_for_no_ping += 1
                await sub.connection.close(1000, "not pinged within the keep-alive interval")
                return

    async def _on_message(self, sub: _Subscriber, message: str | bytes) -> None:
        try:
            request = json.loads(message)
            destination, correlation_id = request["destination"], request["correlationId"]
            payload = request.get("payload") or {}
        except (ValueError, KeyError, TypeError):
            await self._send(sub, {"status": "Error", "payload": {"errorMessage": "Invalid request"}})
            return
        reply: dict[str, Any] = {"status": "OK", "correlationId": str(correlation_id)}
        if destination == "ping":
            self.stats.pings += 1
            sub.last_ping = time.monotonic()
            await self._send(sub, {**reply, "destination": "ping", "payload": {}})
        elif destination == "trades.subscribe":
            self.stats.subscribe_messages += 1
            symbols = [s for s in payload.get("symbols", []) if isinstance(s, str)]
            unknown = [s for s in symbols if s not in {t.symbol for t in self.tape}]
            if unknown:
                await self._send(
                    sub,
                    {
                        "status": "Error",
                        "correlationId": str(correlation_id),
                        "payload": {"errorMessage": f"Invalid symbol: {unknown[0]}"},
                    },
                )
                return
            if not sub.symbols:
                sub.cursor = len(self._outbox)  # a live subscription sees trades from now on
            sub.symbols.update(symbols)
            await self._send(sub, {**reply, "payload": {"subscriptions": dict.fromkeys(symbols, "OK")}})
        else:
            await self._send(
                sub,
                {
                    "status": "Error",
                    "correlationId": str(correlation_id),
                    "payload": {"errorMessage": f"Unknown destination {destination}"},
                },
            )

    async def _send_loop(self, sub: _Subscriber) -> None:
        while True:
            released = self._released
            if sub.cursor >= len(self._outbox) or sub.silent:
                await released.wait()
                continue
            end = len(self._outbox)
            batch = [item.message for item in self._outbox[sub.cursor : end] if item.symbol in sub.symbols]
            sub.cursor = end
            for message in batch:
                try:
                    await sub.connection.send(message)
                except ConnectionClosed:
                    return
            await asyncio.sleep(0)

    async def _send(self, sub: _Subscriber, body: dict[str, Any]) -> None:
        await self._send_quietly(sub.connection, json.dumps(body, separators=(",", ":")))

    # --- REST ------------------------------------------------------------------------

    def _rest_route(self, connection: ServerConnection, path: str, query: dict[str, str]) -> Response:
        if path in ("/api/v1/exchangeInfo", "/api/v2/exchangeInfo"):
            return json_response(connection, HTTPStatus.OK, self._exchange_info())
        if path not in ("/api/v1/aggTrades", "/api/v2/aggTrades"):
            return json_response(connection, HTTPStatus.NOT_FOUND, {"code": -1000, "msg": "not served by the fake"})
        self.rest_queries.append(query)
        try:
            return json_text_response(connection, HTTPStatus.OK, self._agg_trades(query))
        except ValueError as exc:
            return json_response(connection, HTTPStatus.BAD_REQUEST, {"code": -1128, "msg": str(exc)})

    def _exchange_info(self) -> dict[str, Any]:
        return {
            "timezone": "UTC",
            "serverTime": self._clock_ms(),
            "rateLimits": [],
            "symbols": [
                {
                    "symbol": symbol,
                    "status": "TRADING",
                    "quotePrecision": 2,
                    "filters": [{"filterType": "LOT_SIZE", "minQty": "0.001", "maxQty": "100", "stepSize": "0.001"}],
                    "tickSize": 0.01,
                }
                for symbol in sorted({trade.symbol for trade in self.tape})
            ],
        }

    def _agg_trades(self, query: dict[str, str]) -> str:
        symbol = query.get("symbol")
        if symbol not in {trade.symbol for trade in self.tape}:
            raise ValueError(f"Invalid symbol: {symbol}")
        limit = int(query.get("limit", "500"))
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError("Invalid limit")
        start = int(query["startTime"]) if "startTime" in query else None
        end = int(query["endTime"]) if "endTime" in query else None
        if start is not None and end is not None:
            if end < start:
                raise ValueError("startTime should be less than endTime")
            if end - start >= MAX_WINDOW_MS:
                raise ValueError("If both startTime and endTime are sent, time between them must be less than 1 hour")
        rows = [
            e
            for e in self._by_symbol.get(symbol, [])
            if (start is None or e.ts_ms >= start) and (end is None or e.ts_ms <= end)
        ]
        rows = rows[:limit] if start is not None else rows[-limit:]
        body = ",".join(
            f'{{"a":{e.trade.trade_id},"p":"{e.trade.price}","q":"{e.trade.size}","T":{e.ts_ms},'
            f'"m":{json.dumps(not e.trade.buyer)}}}'
            for e in rows
        )
        return f"[{body}]"
