"""What every fake venue server shares: one port on 127.0.0.1 for its websocket path and its
REST routes, the handshake gate, the connection bookkeeping and the common fault knobs.

A venue fake subclasses `FakeVenueServer`, names its `stream_path` and `rest_prefix`, and
writes only what its venue says: `_open` (the per-connection state and its tasks),
`_on_message`, `_rest_route` and the market it holds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response


class VenueConnection(Protocol):
    connection: ServerConnection


@dataclass
class VenueStats:
    connections: int = 0
    refused: int = 0  # handshakes answered 503 by refuse_connections()
    closed_by_fault: int = 0
    rest_requests: int = 0
    rest_refused: int = 0  # REST answered with an error by rest_down() or a venue's own knob


Sub = TypeVar("Sub", bound=VenueConnection)


class FakeVenueServer(Generic[Sub]):
    """Start with `async with` (or `start()` / `stop()`); `ws_url` and `rest_url` are one port."""

    stream_path: ClassVar[str]
    rest_prefix: ClassVar[str]
    # The venue's error body when REST is down (rest_down(True)), answered with HTTP 503.
    rest_down_body: ClassVar[dict[str, Any]]
    stats: VenueStats

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host, self._port = host, port
        self._server: Server | None = None
        self._subscribers: set[Sub] = set()
        # Fire-and-forget tasks, held until done: the loop keeps only weak references.
        self._tasks: set[asyncio.Future[Any]] = set()
        self._refuse = False
        self._rest_down = False

    # --- lifecycle -------------------------------------------------------------------

    def _serve_options(self) -> dict[str, Any]:
        """Keyword arguments for websockets' serve() beyond the handler and the gate."""
        return {}

    async def start(self) -> None:
        self._server = await serve(
            self._handle, self._host, self._port, process_request=self._process_request, **self._serve_options()
        )
        self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for sub in list(self._subscribers):
            sub.connection.transport.abort()  # half-open ones would never finish a close handshake
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def ws_url(self) -> str:
        return f"ws://{self._host}:{self._port}"

    @property
    def rest_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    # --- fault knobs -----------------------------------------------------------------

    def _spawn(self, step: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(step)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close_connections(self) -> int:
        """Close every open connection (as a venue restart would); return how many."""
        subscribers = list(self._subscribers)
        for sub in subscribers:
            self.stats.closed_by_fault += 1
            self._spawn(sub.connection.close(1001, "going away"))
        return len(subscribers)

    def refuse_connections(self, refuse: bool = True) -> None:
        self._refuse = refuse

    def rest_down(self, down: bool = True) -> None:
        self._rest_down = down

    @property
    def open_connections(self) -> int:
        return len(self._subscribers)

    # --- websocket -------------------------------------------------------------------

    def _open(self, connection: ServerConnection) -> tuple[Sub, list[asyncio.Task[None]]]:
        """The new connection's state and the tasks that serve it (cancelled when it ends)."""
        raise NotImplementedError

    async def _on_message(self, sub: Sub, message: str | bytes) -> None:
        raise NotImplementedError

    async def _handle(self, connection: ServerConnection) -> None:
        self.stats.connections += 1
        sub, tasks = self._open(connection)
        self._subscribers.add(sub)
        try:
            async for message in connection:
                await self._on_message(sub, message)
        except ConnectionClosed:
            pass
        finally:
            self._subscribers.discard(sub)
            for task in tasks:
                task.cancel()

    @staticmethod
    async def _send_quietly(connection: ServerConnection, frame: str | bytes) -> bool:
        """Send one frame; False (nothing raised) when the connection has closed."""
        try:
            await connection.send(frame)
            return True
        except ConnectionClosed:
            return False

    # --- HTTP: the handshake gate and REST -------------------------------------------

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        parts = urlsplit(request.path)
        if parts.path.startswith(self.rest_prefix):
            self.stats.rest_requests += 1
            if self._rest_down:
                self.stats.rest_refused += 1
                return json_response(connection, HTTPStatus.SERVICE_UNAVAILABLE, self.rest_down_body)
            query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
            return self._rest_route(connection, parts.path, query)
        if parts.path != self.stream_path:
            return connection.respond(HTTPStatus.NOT_FOUND, "no such path\n")
        if self._refuse:
            self.stats.refused += 1
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "refused by fault injection\n")
        return None

    def _rest_route(self, connection: ServerConnection, path: str, query: dict[str, str]) -> Response:
        """Answer a REST request under `rest_prefix` (the last value of each query parameter)."""
        raise NotImplementedError


def json_response(connection: ServerConnection, status: HTTPStatus, body: object) -> Response:
    return json_text_response(connection, status, json.dumps(body, separators=(",", ":")))


def json_text_response(connection: ServerConnection, status: HTTPStatus, text: str) -> Response:
    """`text` (already JSON, its numbers written exactly) as an application/json answer."""
    response = connection.respond(status, "")
    payload = text.encode()
    headers = Headers(
        [(k, v) for k, v in response.headers.raw_items() if k.lower() not in ("content-type", "content-length")]
    )
    headers["Content-Type"] = "application/json"
    headers["Content-Length"] = str(len(payload))
    return Response(status.value, status.phrase, headers, payload)
