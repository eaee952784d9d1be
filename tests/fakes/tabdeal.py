"""A fake Tabdeal futures venue: the order-book socket and the public REST API on one port.

It holds one book per contract (underscore spelling, `BTC_USDT`) set by the test, and
speaks the venue's documented protocol:

* `ws://HOST:PORT/special_margin/stream/`: `{"method":"SUBSCRIBE","params":[
  "special_margin@BTC_USDT@depth@1000ms"],"id":1}` is answered `{"result":null,"id":1}`
  (a topic that is not of that form, or names an unknown contract or period, is
  answered `{"code":1211,"msg":"Invalid params"}` and skipped); each subscribed topic
  then gets a snapshot every `push_interval_s` (the topic's period unless set), as
  `{"stream":"special_margin-BTC_USDT-depth-1000ms","data":"<JSON text>"}` with
  `{"e":"depthUpdate","E":ms,"s":"BTCUSDT","b":[[price,size],...],"a":[...]}` inside
  (`data_as_text=False` sends the object itself).
* `GET /r/fapi/v1/depth?symbol=BTC_USDT&limit=N` (1..100, default 100):
  `{"lastUpdateId":n,"E":ms,"T":ms,"bids":[...],"asks":[...]}`; an unknown contract is
  HTTP 400 `{"code":1208,"msg":"Invalid symbol"}`.
* `GET /r/fapi/v1/exchangeInfo`: every contract with PRICE_FILTER and LOT_SIZE.

Fault knobs: `close_connections()`, `go_silent()` / `resume()`, `send_close_notice()`
(the venue's hourly `connection closed ok`), `refuse_connections(True)` (HTTP 503 at
the handshake), `rest_down(True)`, `rate_limit_rest(True)` (HTTP 429, code 1216).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, ClassVar

from websockets.asyncio.server import ServerConnection
from websockets.http11 import Response

from tests.fakes.venue_server import FakeVenueServer, VenueStats, json_response

STREAM_PATH = "/special_margin/stream/"
PERIODS_MS = (100, 200, 1000, 5000)
Levels = Sequence[tuple[str, str]]


@dataclass
class FakeBook:
    bids: list[tuple[str, str]]
    asks: list[tuple[str, str]]
    update_id: int = 1


@dataclass(eq=False)
class _Subscriber:
    connection: ServerConnection
    topics: dict[str, int] = field(default_factory=dict)  # contract -> period ms
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class FakeTabdealStats(VenueStats):
    subscribe_messages: int = 0
    snapshots_sent: int = 0
    depth_requests: int = 0
    exchange_info_requests: int = 0


class FakeTabdeal(FakeVenueServer[_Subscriber]):
    """The fake venue. Start with `async with`, then `set_book(...)`."""

    stream_path = STREAM_PATH
    rest_prefix = "/r/fapi/"
    rest_down_body: ClassVar[dict[str, Any]] = {"code": 1300, "msg": "server error"}
    stats: FakeTabdealStats

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        push_interval_s: float | None = None,
        data_as_text: bool = True,
    ) -> None:
        super().__init__(host=host, port=port)
        self.books: dict[str, FakeBook] = {}
        self._push_interval_s = push_interval_s
        self._data_as_text = data_as_text
        self._silent = False
        self._rate_limited = False
        self.stats = FakeTabdealStats()

    # --- the market ------------------------------------------------------------------

    def set_book(self, symbol: str, bids: Levels, asks: Levels) -> None:
        """Replace a contract's book; the next snapshot and REST answer carry it."""
        previous = self.books.get(symbol)
        self.books[symbol] = FakeBook(list(bids), list(asks), (previous.update_id + 1) if previous else 1)

    # --- fault knobs -----------------------------------------------------------------

    def go_silent(self) -> None:
        self._silent = True

    def resume(self) -> None:
        self._silent = False

    def send_close_notice(self) -> None:
        for sub in self._subscribers:
            self._spawn(self._send_quietly(sub.connection, "connection closed ok"))

    def rate_limit_rest(self, limited: bool = True) -> None:
        self._rate_limited = limited

    # --- websocket -------------------------------------------------------------------

    def _open(self, connection: ServerConnection) -> tuple[_Subscriber, list[asyncio.Task[None]]]:
        sub = _Subscriber(connection)
        return sub, [asyncio.create_task(self._push_loop(sub))]

    async def _on_message(self, sub: _Subscriber, message: str | bytes) -> None:
        try:
            request = json.loads(message)
            method, request_id, params = request["method"], request["id"], request.get("params") or []
        except (ValueError, KeyError, TypeError):
            await self._send_quietly(sub.connection, json.dumps({"code": 1202, "msg": "Invalid json"}))
            return
        if method != "SUBSCRIBE":
            await self._send_quietly(sub.connection, json.dumps({"code": 1201, "msg": "Invalid method"}))
            return
        self.stats.subscribe_messages += 1
        accepted = 0
        for topic in params:
            parsed = self._topic(topic)
            if parsed is None:
                await self._send_quietly(sub.connection, json.dumps({"code": 1211, "msg": "Invalid params"}))
                continue
            sub.topics[parsed[0]] = parsed[1]
            accepted += 1
        if accepted:
            sub.subscribed.set()
            await self._send_quietly(sub.connection, json.dumps({"result": None, "id": request_id}))

    def _topic(self, topic: object) -> tuple[str, int] | None:
        parts = topic.split("@") if isinstance(topic, str) else []
        if len(parts) != 4 or parts[0] != "special_margin" or parts[2] != "depth" or parts[1] not in self.books:
            return None
        period = parts[3].removesuffix("ms")
        if not period.isdigit() or int(period) not in PERIODS_MS:
            return None
        return parts[1], int(period)

    async def _push_loop(self, sub: _Subscriber) -> None:
        await sub.subscribed.wait()
        while True:
            await asyncio.sleep(self._push_interval_s or (min(sub.topics.values()) / 1000))
            if self._silent:
                continue
            for symbol, period in list(sub.topics.items()):
                if not await self._send_quietly(sub.connection, self._snapshot_frame(symbol, period)):
                    return
                self.stats.snapshots_sent += 1

    def _snapshot_frame(self, symbol: str, period_ms: int) -> str:
        book = self.books[symbol]
        data = {
            "e": "depthUpdate",
            "E": time.time_ns() // 1_000_000,
            "s": symbol.replace("_", ""),
            "b": [list(level) for level in book.bids],
            "a": [list(level) for level in book.asks],
        }
        payload: object = json.dumps(data, separators=(",", ":")) if self._data_as_text else data
        return json.dumps({"stream": f"special_margin-{symbol}-depth-{period_ms}ms", "data": payload})

    # --- REST ------------------------------------------------------------------------

    def _rest_route(self, connection: ServerConnection, path: str, query: dict[str, str]) -> Response:
        if self._rate_limited:
            self.stats.rest_refused += 1
            return json_response(connection, HTTPStatus.TOO_MANY_REQUESTS, {"code": 1216, "msg": "Too many requests"})
        if path == "/r/fapi/v1/exchangeInfo":
            self.stats.exchange_info_requests += 1
            return json_response(connection, HTTPStatus.OK, self._exchange_info())
        if path == "/r/fapi/v1/depth":
            self.stats.depth_requests += 1
            return self._depth(connection, query)
        return json_response(connection, HTTPStatus.NOT_FOUND, {"code": 1217, "msg": "not served by the fake"})

    def _depth(self, connection: ServerConnection, query: dict[str, str]) -> Response:
        book = self.books.get(query.get("symbol", ""))
        if book is None:
            return json_response(connection, HTTPStatus.BAD_REQUEST, {"code": 1208, "msg": "Invalid symbol"})
        limit_text = query.get("limit", "100")
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 100:
            return json_response(connection, HTTPStatus.BAD_REQUEST, {"code": 1203, "msg": "Invalid limit"})
        limit, now_ms = int(limit_text), time.time_ns() // 1_000_000
        body = {
            "lastUpdateId": book.update_id,
            "E": now_ms,
            "T": now_ms,
            "bids": [list(level) for level in book.bids[:limit]],
            "asks": [list(level) for level in book.asks[:limit]],
        }
        return json_response(connection, HTTPStatus.OK, body)

    def _exchange_info(self) -> dict[str, Any]:
        return {
            "timezone": "UTC",
            "serverTime": time.time_ns() // 1_000_000,
            "symbols": [
                {
                    "symbol": symbol,
                    "status": "TRADING",
                    "filters": [
                        {"filterType": "PRICE_FILTER", "minPrice": "0.1", "maxPrice": "1000000", "tickSize": "0.1"},
                        {"filterType": "LOT_SIZE", "minQty": "0.001", "maxQty": "1000", "stepSize": "0.001"},
                    ],
                }
                for symbol in sorted(self.books)
            ],
        }
