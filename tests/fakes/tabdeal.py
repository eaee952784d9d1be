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
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

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
class FakeTabdealStats:
    connections: int = 0
    refused: int = 0
    subscribe_messages: int = 0
    snapshots_sent: int = 0
    depth_requests: int = 0
    exchange_info_requests: int = 0
    rest_refused: int = 0


class FakeTabdeal:
    """The fake venue. Start with `async with`, then `set_book(...)`."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        push_interval_s: float | None = None,
        data_as_text: bool = True,
    ) -> None:
        self.books: dict[str, FakeBook] = {}
        self._host, self._port = host, port
        self._push_interval_s = push_interval_s
        self._data_as_text = data_as_text
        self._server: Server | None = None
        self._subscribers: set[_Subscriber] = set()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._silent = False
        self._refuse = False
        self._rest_down = False
        self._rate_limited = False
        self.stats = FakeTabdealStats()

    async def __aenter__(self) -> FakeTabdeal:
        self._server = await serve(self._handle, self._host, self._port, process_request=self._process_request)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for sub in list(self._subscribers):
            sub.connection.transport.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def ws_url(self) -> str:
        return f"ws://{self._host}:{self._port}"

    @property
    def rest_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    # --- the market ------------------------------------------------------------------

    def set_book(self, symbol: str, bids: Levels, asks: Levels) -> None:
        """Replace a contract's book; the next snapshot and REST answer carry it."""
        previous = self.books.get(symbol)
        self.books[symbol] = FakeBook(list(bids), list(asks), (previous.update_id + 1) if previous else 1)

    # --- fault knobs -----------------------------------------------------------------

    def _spawn(self, step: Any) -> None:
        task = asyncio.ensure_future(step)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close_connections(self) -> int:
        subscribers = list(self._subscribers)
        for sub in subscribers:
            self._spawn(sub.connection.close(1001, "going away"))
        return len(subscribers)

    def go_silent(self) -> None:
        self._silent = True

    def resume(self) -> None:
        self._silent = False

    def send_close_notice(self) -> None:
        for sub in self._subscribers:
            self._spawn(self._send(sub.connection, "connection closed ok"))

    def refuse_connections(self, refuse: bool = True) -> None:
        self._refuse = refuse

    def rest_down(self, down: bool = True) -> None:
        self._rest_down = down

    def rate_limit_rest(self, limited: bool = True) -> None:
        self._rate_limited = limited

    @property
    def open_connections(self) -> int:
        return len(self._subscribers)

    # --- websocket -------------------------------------------------------------------

    async def _handle(self, connection: ServerConnection) -> None:
        self.stats.connections += 1
        sub = _Subscriber(connection)
        self._subscribers.add(sub)
        pusher = asyncio.create_task(self._push_loop(sub))
        try:
            async for message in connection:
                await self._on_message(sub, message)
        except ConnectionClosed:
            pass
        finally:
            self._subscribers.discard(sub)
            pusher.cancel()

    async def _on_message(self, sub: _Subscriber, message: str | bytes) -> None:
        try:
            request = json.loads(message)
            method, request_id, params = request["method"], request["id"], request.get("params") or []
        except (ValueError, KeyError, TypeError):
            await self._send(sub.connection, json.dumps({"code": 1202, "msg": "Invalid json"}))
            return
        if method != "SUBSCRIBE":
            await self._send(sub.connection, json.dumps({"code": 1201, "msg": "Invalid method"}))
            return
        self.stats.subscribe_messages += 1
        accepted = 0
        for topic in params:
            parsed = self._topic(topic)
            if parsed is None:
                await self._send(sub.connection, json.dumps({"code": 1211, "msg": "Invalid params"}))
                continue
            sub.topics[parsed[0]] = parsed[1]
            accepted += 1
        if accepted:
            sub.subscribed.set()
            await self._send(sub.connection, json.dumps({"result": None, "id": request_id}))

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
                if not await self._send(sub.connection, self._snapshot_frame(symbol, period)):
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

    @staticmethod
    async def _send(connection: ServerConnection, frame: str) -> bool:
        try:
            await connection.send(frame)
            return True
        except ConnectionClosed:
            return False

    # --- HTTP: the handshake gate and REST -------------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        parts = urlsplit(request.path)
        if parts.path.startswith("/r/fapi/"):
            return self._rest(connection, parts.path, {k: v[-1] for k, v in parse_qs(parts.query).items()})
        if parts.path != STREAM_PATH:
            return connection.respond(HTTPStatus.NOT_FOUND, "no such path\n")
        if self._refuse:
            self.stats.refused += 1
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "refused by fault injection\n")
        return None

    def _rest(self, connection: ServerConnection, path: str, query: dict[str, str]) -> Response:
        if self._rest_down:
            self.stats.rest_refused += 1
            return self._json(connection, HTTPStatus.SERVICE_UNAVAILABLE, {"code": 1300, "msg": "server error"})
        if self._rate_limited:
            self.stats.rest_refused += 1
            return self._json(connection, HTTPStatus.TOO_MANY_REQUESTS, {"code": 1216, "msg": "Too many requests"})
        if path == "/r/fapi/v1/exchangeInfo":
            self.stats.exchange_info_requests += 1
            return self._json(connection, HTTPStatus.OK, self._exchange_info())
        if path == "/r/fapi/v1/depth":
            self.stats.depth_requests += 1
            return self._depth(connection, query)
        return self._json(connection, HTTPStatus.NOT_FOUND, {"code": 1217, "msg": "not served by the fake"})

    def _depth(self, connection: ServerConnection, query: dict[str, str]) -> Response:
        book = self.books.get(query.get("symbol", ""))
        if book is None:
            return self._json(connection, HTTPStatus.BAD_REQUEST, {"code": 1208, "msg": "Invalid symbol"})
        limit_text = query.get("limit", "100")
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 100:
            return self._json(connection, HTTPStatus.BAD_REQUEST, {"code": 1203, "msg": "Invalid limit"})
        limit, now_ms = int(limit_text), time.time_ns() // 1_000_000
        body = {
            "lastUpdateId": book.update_id,
            "E": now_ms,
            "T": now_ms,
            "bids": [list(level) for level in book.bids[:limit]],
            "asks": [list(level) for level in book.asks[:limit]],
        }
        return self._json(connection, HTTPStatus.OK, body)

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

    @staticmethod
    def _json(connection: ServerConnection, status: HTTPStatus, body: object) -> Response:
        response = connection.respond(status, "")
        payload = json.dumps(body, separators=(",", ":")).encode()
        headers = Headers(
            [(k, v) for k, v in response.headers.raw_items() if k.lower() not in ("content-type", "content-length")]
        )
        headers["Content-Type"] = "application/json"
        headers["Content-Length"] = str(len(payload))
        return Response(status.value, status.phrase, headers, payload)
