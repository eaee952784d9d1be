"""The `replay` venue: recorded ticks from a CSV file or the database, as a live feed.

Recorded ticks play back through the same parse path as a live venue. A frame is one
line of the tick CSV format (feeds.venues.tick_csv, docs/tick-csv.md), the format
`manage.py exportticks` writes and `manage.py backtest` reads:

    ts_ms,symbol,price,volume[,trade_id[,side[,ts_ns]]]
    1732924800123,BTC-USDT,96712.4,0.015,2435013397,sell,1732924800123456789

`speed` 1 replays at the recorded pace (exchange-time gaps become sleeps), 10 ten
times faster, 0 as fast as possible. Settings: `source` ("csv" with `path`, or
"database" with `source_feed` and an optional `start`/`end` ISO window), `speed`,
`batch_size`. The file or query is read only when the source is iterated.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from django.core.exceptions import ValidationError

from feeds.market import MarketData
from feeds.venues.base import DEFAULT_LIMITS, FeedSpec, RecordedTicks, StatelessStream, StreamState
from feeds.venues.tick_csv import frame_from_tick, parse_tick_line, tick_file_frames

NAME = "replay"
CHANNELS = frozenset({"trades"})
DEFAULTS: dict[str, object] = {
    "source": "csv",
    "path": "",
    "source_feed": "",
    "start": "",
    "end": "",
    "speed": 0,
    "batch_size": 500,
}

Sleep = Callable[[float], Awaitable[None]]


# --- pacing -------------------------------------------------------------------------------


def _frame_time_ns(frame: bytes) -> int | None:
    head = frame.split(b",", 1)[0]
    return int(head) * 1_000_000 if head.isdigit() else None


class ReplaySource:
    """Yields recorded frames in batches, paced by their exchange times divided by `speed`."""

    def __init__(
        self,
        frames: Callable[[], AsyncIterator[bytes]],
        *,
        speed: float,
        batch_size: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._frames = frames
        self._speed = speed
        self._batch_size = batch_size
        self._clock = clock
        self._sleep = sleep

    async def batches(self) -> AsyncIterator[list[bytes]]:
        batch: list[bytes] = []
        started: tuple[float, int] | None = None  # (wall clock, exchange time) of the first frame
        async for frame in self._frames():
            frame_ns = _frame_time_ns(frame)
            if self._speed > 0 and frame_ns is not None:
                if started is None:
                    started = (self._clock(), frame_ns)
                due = started[0] + (frame_ns - started[1]) / 1e9 / self._speed
                wait_s = due - self._clock()
                if wait_s > 0:
                    if batch:
                        yield batch
                        batch = []
                    await self._sleep(wait_s)
            batch.append(frame)
            if len(batch) >= self._batch_size:
                yield batch
                batch = []
                # As fast as possible still lets the loop breathe between batches.
                await self._sleep(0)
        if batch:
            yield batch


def merge_by_time(streams: Iterable[list[MarketData]]) -> Iterator[MarketData]:
    """Return ticks of several instruments merged in exchange-time order."""
    return heapq.merge(*streams, key=lambda tick: tick.ts_event)


def _iso_to_ns(text: str) -> int:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def database_frames(
    feed: FeedSpec,
    settings: Mapping[str, object],
    recorded_ticks: RecordedTicks,
) -> Callable[[], AsyncIterator[bytes]]:
    """Return a frame iterator over ticks recorded on `source_feed` for the feed's instruments."""

    async def frames() -> AsyncIterator[bytes]:
        start = _iso_to_ns(str(settings["start"])) if settings["start"] else 0
        end = _iso_to_ns(str(settings["end"])) if settings["end"] else 2**63 - 1
        per_instrument = [
            await recorded_ticks(str(settings["source_feed"]), spec.venue_symbol, start, end)
            for spec in feed.instruments
        ]
        for tick in merge_by_time(per_instrument):
            yield frame_from_tick(tick)

    return frames


# --- the venue --------------------------------------------------------------------------


class ReplayVenue:
    name = NAME
    channels = CHANNELS
    limits = DEFAULT_LIMITS  # nothing is dialled or fetched
    default_market_type = "spot"

    def clean_settings(self, settings: Mapping[str, object]) -> dict[str, object]:
        cleaned = {**DEFAULTS, **settings}
        errors: dict[str, str] = {}
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            errors["settings"] = f"unknown keys {sorted(unknown)}; allowed: {sorted(DEFAULTS)}"
        source = cleaned["source"]
        if source == "csv":
            if not isinstance(cleaned["path"], str) or not cleaned["path"]:
                errors["path"] = "path must name a CSV file of recorded ticks"
        elif source == "database":
            if not isinstance(cleaned["source_feed"], str) or not cleaned["source_feed"]:
                errors["source_feed"] = "source_feed must name the feed whose recorded ticks to replay"
            for key in ("start", "end"):
                try:
                    if cleaned[key]:
                        _iso_to_ns(str(cleaned[key]))
                except ValueError:
                    errors[key] = f"{key} must be an ISO 8601 date or time"
        else:
            errors["source"] = "source must be csv or database"
        speed = cleaned["speed"]
        if not isinstance(speed, (int, float)) or isinstance(speed, bool) or not 0 <= speed <= 1_000_000:
            errors["speed"] = "speed must be 0 (as fast as possible) or a positive multiple of recorded speed"
        batch = cleaned["batch_size"]
        if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 100_000:
            errors["batch_size"] = "batch_size must be an integer from 1 to 100000"
        if errors:
            raise ValidationError({key: [message] for key, message in errors.items()})
        return cleaned

    def open(self, feed: FeedSpec, *, recorded_ticks: RecordedTicks | None = None) -> ReplaySource:
        """Return the feed's frame source; a database replay reads through `recorded_ticks`."""
        settings = self.clean_settings(feed.settings)
        if settings["source"] == "csv":
            path = Path(str(settings["path"]))

            def frames() -> AsyncIterator[bytes]:
                return tick_file_frames(path)
        elif recorded_ticks is None:
            raise LookupError(f"feed {feed.name}: a database replay needs the recorded-tick reader")
        else:
            frames = database_frames(feed, settings, recorded_ticks)
        speed, batch_size = settings["speed"], settings["batch_size"]
        assert isinstance(speed, (int, float)) and isinstance(batch_size, int)  # clean_settings checked both
        return ReplaySource(frames, speed=float(speed), batch_size=batch_size)

    # The tick CSV line parse itself, so the hot path pays no extra call.
    parse = staticmethod(parse_tick_line)

    def new_stream_state(self) -> StreamState:
        return StatelessStream()


VENUE = ReplayVenue()
