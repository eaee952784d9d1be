"""The Upstox day boundary through a live stream: the recorder stores a duration of 0 there.

A local server stands in for Upstox (the authorize call over HTTP, then protobuf frames
on the websocket it names); the real supervised stream parses them and the real
recorder writes them to the database.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from http import HTTPStatus

import pytest
from channels.db import database_sync_to_async
from upstox_client.feeder.proto import MarketDataFeedV3_pb2 as pb
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from core.fixed_point import SCALE
from core.health import HealthBoard
from feeds.models import Tick
from feeds.recording.database_writer import writer_for_database
from feeds.recording.recorder import TickRecorder
from feeds.recording.tick_selectors import tick_addresses
from feeds.streams.feed_streams import FeedStreamSettings, build_feed_streams
from feeds.venues.base import FeedSpec, InstrumentSpec
from feeds.venues.upstox import AUTHORIZE_PATH, UpstoxVenue
from tests.feeds.factories import make_feed
from tests.feeds.stream_harness import FAST_POLICY, FAST_TRANSPORT, stop
from tests.helpers import async_eventually

KEY = "NSE_EQ|INE848E01016"
T0_MS = 1_732_851_000_000  # 2024-11-29 09:00 IST
MINUTE_MS = 60_000
HOUR_MS = 3_600_000


def _tick(ltt_ms: int, ltq: int, vtt: int) -> bytes:
    response = pb.FeedResponse(type=pb.live_feed, currentTs=ltt_ms + 5)
    market = response.feeds[KEY].fullFeed.marketFF
    market.ltpc.ltp, market.ltpc.ltt, market.ltpc.ltq = 82.35, ltt_ms, ltq
    market.vtt = vtt
    return response.SerializeToString()


# The first trade of the stream, one a minute later, then the next morning's first
# trade 17 hours on, when the day's volume (vtt) has started again from nothing.
FRAMES = (
    pb.FeedResponse(type=pb.market_info, currentTs=T0_MS).SerializeToString(),
    _tick(T0_MS, 10, 1_000_000),
    _tick(T0_MS + MINUTE_MS, 50, 1_000_050),
    _tick(T0_MS + 17 * HOUR_MS, 400, 400),
)


class FakeUpstoxFeed:
    """Answers the authorize call with its own websocket URL; sends FRAMES after the subscribe."""

    def __init__(self) -> None:
        self.subscriptions: list[dict[str, object]] = []
        self.url = ""

    async def _handle(self, connection: ServerConnection) -> None:
        subscribe = await connection.recv()
        self.subscriptions.append(json.loads(subscribe))
        for frame in FRAMES:
            await connection.send(frame)  # bytes: a binary frame, as Upstox sends
        await connection.wait_closed()

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if not request.path.startswith(AUTHORIZE_PATH):
            return None
        body = json.dumps({"status": "success", "data": {"authorized_redirect_uri": f"{self.url}/feed"}}).encode()
        response = connection.respond(HTTPStatus.OK, "")
        headers = Headers(
            [(k, v) for k, v in response.headers.raw_items() if k.lower() not in ("content-type", "content-length")]
        )
        headers["Content-Type"] = "application/json"
        headers["Content-Length"] = str(len(body))
        return Response(200, "OK", headers, body)

    async def serve(self) -> AsyncIterator[FakeUpstoxFeed]:
        async with serve(self._handle, "127.0.0.1", 0, process_request=self._process_request) as server:
            port = server.sockets[0].getsockname()[1]
            self.url = f"ws://127.0.0.1:{port}"
            yield self


@pytest.fixture
async def fake_upstox() -> AsyncIterator[FakeUpstoxFeed]:
    async for fake in FakeUpstoxFeed().serve():
        yield fake


async def _token() -> str:
    return "analytics-token"


@pytest.mark.django_db(transaction=True)
async def test_the_recorder_stores_a_zero_duration_at_the_upstox_day_boundary(fake_upstox: FakeUpstoxFeed) -> None:
    await database_sync_to_async(make_feed)("up", (KEY,), venue="upstox")
    keys = await database_sync_to_async(tick_addresses)(["up"])
    recorder = TickRecorder(
        await database_sync_to_async(writer_for_database)(), keys, batch_size=100, flush_interval_s=0.01
    )
    venue = UpstoxVenue(_token)
    spec = FeedSpec(
        name="up",
        venue="upstox",
        settings=venue.clean_settings({"rest_url": fake_upstox.url.replace("ws://", "http://")}),
        instruments=(InstrumentSpec(KEY, "0.05", "1"),),
    )
    streams = await build_feed_streams(
        spec,
        venue,
        publish=recorder.offer,
        health=HealthBoard(),
        limiter=None,
        settings=FeedStreamSettings(policy=FAST_POLICY, transport=FAST_TRANSPORT, rest_timeout_s=2),
    )
    tasks = [asyncio.create_task(stream.run()) for stream in streams] + [asyncio.create_task(recorder.run())]
    recorded = database_sync_to_async(
        lambda: list(Tick.objects.order_by("ts_event").values_list("ts_event", "volume", "duration_since_last_ns"))
    )
    try:
        await async_eventually(lambda: _count_is(recorded, 3), timeout_s=20)
    finally:
        await stop(tasks)
    assert fake_upstox.subscriptions[0]["data"] == {"mode": "full", "instrumentKeys": [KEY]}
    assert await recorded() == [
        (T0_MS * 1_000_000, 0, None),  # cold start: no previous trade, no volume known
        ((T0_MS + MINUTE_MS) * 1_000_000, 50 * SCALE, MINUTE_MS * 1_000_000),
        ((T0_MS + 17 * HOUR_MS) * 1_000_000, 400 * SCALE, 0),  # the day boundary: 0, not 17 hours
    ]


async def _count_is(recorded, count: int) -> bool:  # type: ignore[no-untyped-def]
    return len(await recorded()) == count
