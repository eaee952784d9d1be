"""A local stand-in for Upstox's market data feed: the authorize call, the instruments file, the websocket.

One websockets server on 127.0.0.1 answers the HTTP calls the venue makes before it
dials (GET the authorize path -> a single-use websocket URL on the same server; GET the
instruments file) and then serves protobuf frames on the websocket it named. It records
the bearer token of every authorize call, can refuse a token the way Upstox does (HTTP
401 UDAPI100050), and can drop every open socket to force a redial.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from http import HTTPStatus

from upstox_client.feeder.proto import MarketDataFeedV3_pb2 as pb
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from feeds.venues.upstox import AUTHORIZE_PATH

KEY = "NSE_EQ|INE848E01016"
INSTRUMENTS_PATH = "/instruments.json"
T0_MS = 1_732_851_000_000


def live_tick(ltt_ms: int, ltq: int, vtt: int, *, key: str = KEY) -> bytes:
    response = pb.FeedResponse(type=pb.live_feed, currentTs=ltt_ms + 5)
    market = response.feeds[key].fullFeed.marketFF
    market.ltpc.ltp, market.ltpc.ltt, market.ltpc.ltq = 82.35, ltt_ms, ltq
    market.vtt = vtt
    return response.SerializeToString()


class FakeUpstoxMarketFeed:
    def __init__(self) -> None:
        self.url = ""
        self.authorizations: list[str] = []  # the Authorization header of each authorize call
        self.rejected: set[str] = set()  # bearer tokens answered with 401 UDAPI100050
        self.connections: list[ServerConnection] = []
        self.subscriptions = 0
        self._vtt = 0
        self._ltt = T0_MS

    @property
    def http_url(self) -> str:
        return self.url.replace("ws://", "http://")

    def settings(self) -> dict[str, object]:
        return {"rest_url": self.http_url, "instruments_url": f"{self.http_url}{INSTRUMENTS_PATH}", "mode": "full"}

    async def drop_connections(self) -> None:
        for connection in list(self.connections):
            await connection.close()

    async def _handle(self, connection: ServerConnection) -> None:
        self.connections.append(connection)
        try:
            await connection.recv()  # the subscribe request
            self.subscriptions += 1
            await connection.send(pb.FeedResponse(type=pb.market_info, currentTs=self._ltt).SerializeToString())
            for _ in range(3):
                self._ltt += 1000
                self._vtt += 10
                await connection.send(live_tick(self._ltt, 10, self._vtt))
            await connection.wait_closed()
        finally:
            self.connections.remove(connection)

    def _json(self, connection: ServerConnection, status: HTTPStatus, payload: object) -> Response:
        body = json.dumps(payload).encode()
        response = connection.respond(status, "")
        headers = Headers(
            [(k, v) for k, v in response.headers.raw_items() if k.lower() not in ("content-type", "content-length")]
        )
        headers["Content-Type"] = "application/json"
        headers["Content-Length"] = str(len(body))
        return Response(status.value, status.phrase, headers, body)

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path.startswith(INSTRUMENTS_PATH):
            return self._json(
                connection,
                HTTPStatus.OK,
                [{"instrument_key": KEY, "tick_size": 5.0, "lot_size": 1, "segment": "NSE_EQ"}],
            )
        if not request.path.startswith(AUTHORIZE_PATH):
            return None
        bearer = request.headers.get("Authorization", "")
        self.authorizations.append(bearer)
        if bearer.removeprefix("Bearer ") in self.rejected:
            error = {"errorCode": "UDAPI100050", "message": "Invalid token used to access API"}
            return self._json(connection, HTTPStatus.UNAUTHORIZED, {"status": "error", "errors": [error]})
        return self._json(
            connection, HTTPStatus.OK, {"status": "success", "data": {"authorized_redirect_uri": f"{self.url}/feed"}}
        )

    async def serve(self) -> AsyncIterator[FakeUpstoxMarketFeed]:
        async with serve(self._handle, "127.0.0.1", 0, process_request=self._process_request) as server:
            port = server.sockets[0].getsockname()[1]
            self.url = f"ws://127.0.0.1:{port}"
            yield self
