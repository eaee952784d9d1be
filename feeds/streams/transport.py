"""The websocket transport: dial an Endpoint, keep the connection alive, send and receive.

Built on `websockets`' asyncio client, but the redial loop is the stream runtime's (the
library's own reconnect only retries handshakes, on its own delays). Every dial and
every outgoing message takes a token from the venue's bucket first and fails closed.
Keep-alive: the client pings every `ping_interval_s` and drops a connection whose pong
does not arrive within `ping_timeout_s`, so a half-open connection (no data, no pong)
ends within about ping_interval_s + ping_timeout_s (20 s by default). Venues that want
an application-level ping (KuCoin) get it from `ping_message` on their interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from aiolimiter import AsyncLimiter
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from feeds.streams.venue_limiter import VenueRateLimiter
from feeds.venues.base import Endpoint, KeepAlive, WireMessage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransportSettings:
    open_timeout_s: float = 10.0
    ping_interval_s: float = 10.0
    ping_timeout_s: float = 10.0
    close_timeout_s: float = 2.0
    max_size: int = 2**20
    # Frames buffered before the library stops reading the socket (back-pressure on TCP
    # while gap recovery runs); a high-water mark, not a drop point.
    max_queue: int = 1024


class WebSocketConnection:
    """One open connection; `recv` returns raw frame bytes (text frames too)."""

    def __init__(
        self,
        socket: ClientConnection,
        endpoint: Endpoint,
        *,
        opened_at: float,
        limiter: VenueRateLimiter | None,
        message_bucket: AsyncLimiter | None,
    ) -> None:
        self._socket = socket
        self.endpoint = endpoint
        self.opened_at = opened_at  # event loop (monotonic) time
        self._limiter = limiter
        self._message_bucket = message_bucket
        self._ping_task: asyncio.Task[None] | None = None

    async def send(self, message: WireMessage) -> None:
        if self._limiter is not None:
            await self._limiter.acquire_message(self._message_bucket)
        await self._socket.send(message)

    async def recv(self) -> bytes:
        """Return the next frame; raise websockets' ConnectionClosed when the connection ends."""
        frame = await self._socket.recv(decode=False)
        return frame if isinstance(frame, bytes) else frame.encode()

    @property
    def closed(self) -> bool:
        return self._socket.close_code is not None

    def start_client_pings(self, interval_s: float, message: Callable[[int], WireMessage | None]) -> None:
        """Send the venue's application ping every `interval_s` (KuCoin-style keep-alive)."""

        async def ping_forever() -> None:
            counter = 0
            with contextlib.suppress(ConnectionClosed):
                while True:
                    await asyncio.sleep(interval_s)
                    counter += 1
                    ping = message(counter)
                    if ping is not None:
                        await self.send(ping)

        self._ping_task = asyncio.create_task(ping_forever(), name=f"ws-ping:{self.endpoint.url}")

    async def close(self) -> None:
        if self._ping_task is not None:
            self._ping_task.cancel()
        await self._socket.close()


async def dial(
    endpoint: Endpoint,
    settings: TransportSettings,
    *,
    limiter: VenueRateLimiter | None = None,
    keep_alive: KeepAlive | None = None,
    ping_message: Callable[[int], WireMessage | None] | None = None,
) -> WebSocketConnection:
    """Open a connection to `endpoint` (no subscribing); raise on refusal or timeout."""
    if limiter is not None:
        await limiter.acquire_dial()
    socket = await connect(
        endpoint.url,
        additional_headers=dict(endpoint.headers) or None,
        open_timeout=settings.open_timeout_s,
        ping_interval=settings.ping_interval_s,
        ping_timeout=settings.ping_timeout_s,
        close_timeout=settings.close_timeout_s,
        max_size=settings.max_size,
        max_queue=settings.max_queue,
        proxy=None,
    )
    connection = WebSocketConnection(
        socket,
        endpoint,
        opened_at=asyncio.get_running_loop().time(),
        limiter=limiter,
        message_bucket=limiter.message_limiter() if limiter is not None else None,
    )
    rules = endpoint.keep_alive or keep_alive
    if rules is not None and rules.client_ping_interval_s and ping_message is not None:
        connection.start_client_pings(rules.client_ping_interval_s, ping_message)
    return connection
