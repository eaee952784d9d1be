"""The owner of one stream's websocket: connect (replacing the old socket), subscribe, hand over.

It is the reconnect coordinator's connect dispatcher and subscription manager. The
endpoint is asked for again on every dial because some venues hand out single-use
URLs or tokens.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from feeds.streams.transport import WebSocketConnection
from feeds.venues.base import Endpoint

log = logging.getLogger(__name__)

EndpointSource = Callable[[], Awaitable[Endpoint]]
Dialer = Callable[[Endpoint], Awaitable[WebSocketConnection]]


class NotConnected(ConnectionError):
    """Subscribing was asked for with no open connection."""


class SocketSession:
    def __init__(self, endpoint_source: EndpointSource, dial: Dialer) -> None:
        self._endpoint_source = endpoint_source
        self._dial = dial
        self._current: WebSocketConnection | None = None
        self.dials = 0

    @property
    def current(self) -> WebSocketConnection | None:
        return self._current

    async def connect(self) -> None:
        """Close the current socket, if any, and open a new one (not yet subscribed)."""
        old, self._current = self._current, None
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close()
        endpoint = await self._endpoint_source()
        self.dials += 1
        self._current = await self._dial(endpoint)

    async def restore_subscriptions(self) -> None:
        connection = self._current
        if connection is None:
            raise NotConnected("no connection to subscribe on")
        await self._subscribe(connection)

    async def handover(self) -> None:
        """Open and subscribe a new socket before closing the current one (planned redial)."""
        endpoint = await self._endpoint_source()
        self.dials += 1
        fresh = await self._dial(endpoint)
        try:
            await self._subscribe(fresh)
        except BaseException:
            with contextlib.suppress(Exception):
                await fresh.close()
            raise
        old, self._current = self._current, fresh
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close()

    async def close(self) -> None:
        old, self._current = self._current, None
        if old is not None:
            with contextlib.suppress(Exception):
                await old.close()

    @staticmethod
    async def _subscribe(connection: WebSocketConnection) -> None:
        for message in connection.endpoint.subscribe:
            await connection.send(message)
