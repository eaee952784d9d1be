"""A fake Binance USD-M futures venue: websocket market streams and REST aggTrades on one port.

It replays a tape of aggregate trades at a configurable rate. Trades are stamped with
the wall-clock millisecond at which they are released, sent to every connection
subscribed to their stream in the venue's combined-stream frame, and served afterwards
by `GET /fapi/v1/aggTrades` (startTime/endTime < 1 h, fromId, limit <= 1000, retention).
`GET /fapi/v1/exchangeInfo` lists the tape's symbols (or `listed`, when set) with a
PRICE_FILTER tick of 0.10 and a LOT_SIZE step of 0.001.

    {"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1764460800125,"s":"BTCUSDT",
     "a":5001,"p":"96712.40","q":"0.015","f":5001,"l":5001,"T":1764460800123,"m":true}}

Connections are accepted on `/market/stream` (SUBSCRIBE messages, or `?streams=a/b`).
Fault knobs: `close_connections()`, `go_silent()` (no data, pings still answered),
`go_half_open()` (no data, no pongs), `send_garbage()`, `inject(frame)` (a raw frame
sent in order between the trades, to every subscriber of its stream; bytes go as a
binary frame), `refuse_connections(True)`
(HTTP 503 at the handshake), `slow_down(delay_s)` per frame, `rest_down(True)`,
`metadata_down(True)` (exchangeInfo alone answers HTTP 503), `listed = {...}`, and
`max_connection_age_s` (the server cuts older connections, as Binance does at 24 h).

Usable from tests and from bench/: `async with FakeBinanceUsdm(tape) as venue: venue.ws_url`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from http import HTTPStatus
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode
from websockets.http11 import Response

from tests.fakes.venue_server import FakeVenueServer, VenueStats, json_response

MAX_WINDOW_MS = 3_600_000
MAX_LIMIT = 1000
_BURST = 256  # frames per write


@dataclass(frozen=True, slots=True)
class TapeTrade:
    """One aggregate trade the venue will execute, in the venue's terms."""

    symbol: str  # BTCUSDT
    agg_id: int  # `a`, increasing per symbol
    price: str  # `p`
    quantity: str  # `q`
    buyer_is_maker: bool  # `m`


@dataclass(frozen=True, slots=True)
class _Outgoing:
    """One frame of the stream every connection is sent, in order: a trade or an injected frame."""

    stream: str
    message: str | bytes  # str: a text frame; bytes: a binary frame
    wire: bytes  # serialized once, unmasked, as a server sends it


@dataclass(slots=True)
class ExecutedTrade:
    trade: TapeTrade
    ts_ms: int  # `T`
    frame: str  # the combined-stream frame (a text frame, as the venue sends)
    stream: str = ""  # "btcusdt@aggTrade"
    # The whole websocket text frame on the wire (server frames are unmasked), serialized
    # once by websockets itself, so replaying to many connections costs one write per burst.
    wire: bytes = b""

    def __post_init__(self) -> None:
        self.stream = f"{self.trade.symbol.lower()}@aggTrade"
        self.wire = Frame(Opcode.TEXT, self.frame.encode()).serialize(mask=False, extensions=[])


def make_tape(
    count: int, symbols: Sequence[str] = ("BTCUSDT", "ETHUSDT"), *, seed: int = 7, first_id: int = 5_000
) -> list[TapeTrade]:
    """Return `count` trades spread over `symbols`, with exact prices and sizes."""
    rng = random.Random(seed)
    ticks = {symbol: 9_671_240 + 1000 * n for n, symbol in enumerate(symbols)}
    next_id = dict.fromkeys(symbols, first_id)
    tape = []
    for _ in range(count):
        symbol = rng.choice(symbols)
        ticks[symbol] = max(1, ticks[symbol] + rng.randint(-5, 5))
        price = Decimal(ticks[symbol]).scaleb(-2)
        quantity = Decimal(rng.randint(1, 50_000)).scaleb(-3)
        tape.append(TapeTrade(symbol, next_id[symbol], f"{price:f}", f"{quantity:f}", rng.random() < 0.5))
        next_id[symbol] += 1
    return tape


def _agg_frame(trade: TapeTrade, ts_ms: int) -> str:
    data = {
        "e": "aggTrade",
        "E": ts_ms + 2,
        "s": trade.symbol,
        "a": trade.agg_id,
        "p": trade.price,
        "q": trade.quantity,
        "nq": trade.quantity,
        "f": trade.agg_id * 3,
        "l": trade.agg_id * 3 + 1,
        "T": ts_ms,
        "m": trade.buyer_is_maker,
    }
    return json.dumps({"stream": f"{trade.symbol.lower()}@aggTrade", "data": data}, separators=(",", ":"))


@dataclass(eq=False)
class _Subscriber:
    connection: ServerConnection
    streams: set[str] = field(default_factory=set)
    cursor: int = 0  # index into the executed trades of the next one to consider
    silent: bool = False
    opened_at: float = field(default_factory=time.monotonic)


@dataclass
class FakeVenueStats(VenueStats):
    garbage_frames: int = 0
    exchange_info_requests: int = 0
    subscribe_messages: int = 0
    injected_frames: int = 0


class FakeBinanceUsdm(FakeVenueServer[_Subscriber]):
    """The fake venue. Start with `async with`, then `release_all()` or `play(rate)`."""

    stream_path = "/market/stream"
    rest_prefix = "/fapi/"
    rest_down_body: ClassVar[dict[str, Any]] = {"code": -1001, "msg": "Internal error"}
    stats: FakeVenueStats

    def __init__(
        self,
        tape: Sequence[TapeTrade] = (),
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        retention_s: float = 24 * 3600.0,
        max_connection_age_s: float | None = None,
        server_ping_interval_s: float | None = None,
        clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        super().__init__(host=host, port=port)
        self.tape = list(tape)
        self.executed: list[ExecutedTrade] = []
        self._outbox: list[_Outgoing] = []  # what connections are sent, trades and injected frames
        self._by_symbol: dict[str, list[ExecutedTrade]] = {}
        self._retention_ms = int(retention_s * 1000)
        self._max_age_s = max_connection_age_s
        self._ping_interval_s = server_ping_interval_s
        self._clock_ms = clock_ms
        self._released = asyncio.Event()
        self._metadata_down = False
        # Symbols exchangeInfo lists; None = every symbol of the tape.
        self.listed: set[str] | None = None
        self._delay_s = 0.0
        self._play_task: asyncio.Task[None] | None = None
        self.stats = FakeVenueStats()

    # --- lifecycle -------------------------------------------------------------------

    def _serve_options(self) -> dict[str, Any]:
        return {"ping_interval": self._ping_interval_s, "max_queue": None, "compression": None, "close_timeout": 1}

    async def stop(self) -> None:
        if self._play_task is not None:
            self._play_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._play_task
        await super().stop()

    # --- the market ------------------------------------------------------------------

    def release(self, count: int) -> int:
        """Execute the next `count` trades of the tape now; return how many were left to release."""
        start = len(self.executed)
        batch = self.tape[start : start + count]
        ts_ms = self._clock_ms()
        for trade in batch:
            executed = ExecutedTrade(trade, ts_ms, _agg_frame(trade, ts_ms))
            self.executed.append(executed)
            self._outbox.append(_Outgoing(executed.stream, executed.frame, executed.wire))
            self._by_symbol.setdefault(trade.symbol, []).append(executed)
        if batch:
            self._wake_senders()
        return len(self.tape) - len(self.executed)

    def inject(self, frame: str | bytes, *, stream: str = "btcusdt@aggTrade") -> None:
        """Send `frame` as it is, after the trades released so far and before the next ones."""
        opcode = Opcode.BINARY if isinstance(frame, bytes) else Opcode.TEXT
        payload = frame if isinstance(frame, bytes) else frame.encode()
        self._outbox.append(_Outgoing(stream, frame, Frame(opcode, payload).serialize(mask=False, extensions=[])))
        self.stats.injected_frames += 1
        self._wake_senders()

    def _wake_senders(self) -> None:
        self._released.set()
        self._released = asyncio.Event()

    def play(self, rate_per_s: float, *, tick_s: float = 0.005) -> asyncio.Task[None]:
        """Release the tape at `rate_per_s` trades per second in the background."""

        async def run() -> None:
            started = time.monotonic()
            while len(self.executed) < len(self.tape):
                due = int((time.monotonic() - started) * rate_per_s) + 1
                if due > len(self.executed):
                    self.release(due - len(self.executed))
                await asyncio.sleep(tick_s)

        self._play_task = asyncio.create_task(run(), name="fake-binance:play")
        return self._play_task

    @property
    def finished(self) -> bool:
        return len(self.executed) == len(self.tape)

    # --- fault knobs -----------------------------------------------------------------

    def go_silent(self) -> None:
        """Stop sending data on every open connection; pings are still answered."""
        for sub in self._subscribers:
            sub.silent = True

    def go_half_open(self) -> None:
        """Stop sending and stop reading on every open connection: no data, no pongs."""
        for sub in self._subscribers:
            sub.silent = True
            sub.connection.transport.pause_reading()

    def send_garbage(self) -> None:
        for sub in self._subscribers:
            self.stats.garbage_frames += 1
            self._spawn(self._send_quietly(sub.connection, '{"stream":"btcusdt@aggTrade","data":{"e":'))

    def slow_down(self, delay_s: float) -> None:
        """Wait `delay_s` before each frame (0 = full speed)."""
        self._delay_s = delay_s

    def metadata_down(self, down: bool = True) -> None:
        self._metadata_down = down

    def subscribed_streams(self) -> set[str]:
        """Every stream some open connection is subscribed to ("btcusdt@aggTrade")."""
        return {stream for sub in self._subscribers for stream in sub.streams}

    # --- websocket -------------------------------------------------------------------

    def _open(self, connection: ServerConnection) -> tuple[_Subscriber, list[asyncio.Task[None]]]:
        sub = _Subscriber(connection, cursor=len(self._outbox))
        query = parse_qs(urlsplit(connection.request.path).query)  # type: ignore[union-attr]
        for names in query.get("streams", []):
            sub.streams.update(name for name in names.split("/") if name)
        return sub, [asyncio.create_task(self._send_loop(sub))]

    async def _on_message(self, sub: _Subscriber, message: str | bytes) -> None:
        try:
            request = json.loads(message)
            method, request_id = request["method"], request["id"]
        except (ValueError, KeyError, TypeError):
            await self._send_quietly(sub.connection, json.dumps({"code": 3, "msg": "Invalid JSON"}))
            return
        if method == "SUBSCRIBE":
            self.stats.subscribe_messages += 1
            # A live subscription sees trades from now on, not the ones before it.
            if not sub.streams:
                sub.cursor = len(self._outbox)
            sub.streams.update(request.get("params", []))
            await sub.connection.send(json.dumps({"result": None, "id": request_id}))
        elif method == "UNSUBSCRIBE":
            sub.streams.difference_update(request.get("params", []))
            await sub.connection.send(json.dumps({"result": None, "id": request_id}))
        elif method == "LIST_SUBSCRIPTIONS":
            await sub.connection.send(json.dumps({"result": sorted(sub.streams), "id": request_id}))
        else:
            await sub.connection.send(json.dumps({"code": 2, "msg": f"Invalid request: unknown method {method}"}))

    async def _send_loop(self, sub: _Subscriber) -> None:
        connection = sub.connection
        while True:
            released = self._released
            if self._max_age_s is not None and time.monotonic() - sub.opened_at >= self._max_age_s:
                await connection.close(1000, "connection age limit")
                return
            if sub.cursor >= len(self._outbox) or sub.silent:
                timeout = None if self._max_age_s is None else self._max_age_s / 4
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await released.wait()
                continue
            end = min(len(self._outbox), sub.cursor + _BURST)
            if self._delay_s:
                for outgoing in self._outbox[sub.cursor : end]:
                    if sub.silent:
                        break
                    if outgoing.stream in sub.streams:
                        await asyncio.sleep(self._delay_s)
                        if not await self._send_quietly(connection, outgoing.message):
                            return
                    sub.cursor += 1
            else:
                streams = sub.streams
                wires = [e.wire for e in self._outbox[sub.cursor : end] if e.stream in streams]
                sub.cursor = end
                if wires and not await self._send_burst(connection, wires):
                    return
            await asyncio.sleep(0)

    @staticmethod
    async def _send_burst(connection: ServerConnection, wires: list[bytes]) -> bool:
        """Send many serialized text frames with one write: a real venue streams far faster
        than one await per frame, and on a shared machine the client under test, not the
        fake's own framing work, should be what limits the rate."""
        try:
            # send_context checks the connection is open and keeps other writes (pongs,
            # replies) from interleaving inside the burst.
            async with connection.send_context():
                connection.transport.write(b"".join(wires))
            return True
        except ConnectionClosed:
            return False

    # --- REST ------------------------------------------------------------------------

    def _rest_route(self, connection: ServerConnection, path: str, query: dict[str, str]) -> Response:
        if path == "/fapi/v1/exchangeInfo":
            self.stats.exchange_info_requests += 1
            if self._metadata_down:
                return json_response(
                    connection, HTTPStatus.SERVICE_UNAVAILABLE, {"code": -1001, "msg": "Internal error"}
                )
            return json_response(connection, HTTPStatus.OK, self._exchange_info())
        if path != "/fapi/v1/aggTrades":
            return json_response(connection, HTTPStatus.NOT_FOUND, {"code": -1000, "msg": "not served by the fake"})
        try:
            return json_response(connection, HTTPStatus.OK, self._agg_trades(query))
        except ValueError as exc:
            return json_response(connection, HTTPStatus.BAD_REQUEST, {"code": -1127, "msg": str(exc)})

    def _exchange_info(self) -> dict[str, Any]:
        symbols = self.listed if self.listed is not None else {trade.symbol for trade in self.tape}
        return {
            "timezone": "UTC",
            "serverTime": self._clock_ms(),
            "rateLimits": [],
            "exchangeFilters": [],
            "symbols": [
                {
                    "symbol": symbol,
                    "pair": symbol,
                    "contractType": "PERPETUAL",
                    "status": "TRADING",
                    "pricePrecision": 2,
                    "quantityPrecision": 3,
                    "filters": [
                        {"filterType": "PRICE_FILTER", "minPrice": "0.10", "maxPrice": "4529764", "tickSize": "0.10"},
                        {"filterType": "LOT_SIZE", "minQty": "0.001", "maxQty": "1000", "stepSize": "0.001"},
                    ],
                }
                for symbol in sorted(symbols)
            ],
        }

    def _agg_trades(self, query: dict[str, str]) -> list[dict[str, Any]]:
        if "symbol" not in query:
            raise ValueError("Mandatory parameter 'symbol' was not sent")
        limit = int(query.get("limit", "500"))
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be 1..{MAX_LIMIT}")
        start = int(query["startTime"]) if "startTime" in query else None
        end = int(query["endTime"]) if "endTime" in query else None
        from_id = int(query["fromId"]) if "fromId" in query else None
        if start is not None and end is not None and not 0 <= end - start < MAX_WINDOW_MS:
            raise ValueError("More than 1 hours between startTime and endTime.")
        oldest = self._clock_ms() - self._retention_ms
        filtered = start is not None or end is not None or from_id is not None
        rows = []
        for executed in self._by_symbol.get(query["symbol"], []):
            trade, ts_ms = executed.trade, executed.ts_ms
            if (
                ts_ms < oldest
                or (start is not None and ts_ms < start)
                or (from_id is not None and trade.agg_id < from_id)
            ):
                continue
            if end is not None and ts_ms > end:
                break
            rows.append(
                {
                    "a": trade.agg_id,
                    "p": trade.price,
                    "q": trade.quantity,
                    "f": trade.agg_id * 3,
                    "l": trade.agg_id * 3 + 1,
                    "T": ts_ms,
                    "m": trade.buyer_is_maker,
                }
            )
            if len(rows) == limit and filtered:
                break
        return rows if filtered else rows[-limit:]
