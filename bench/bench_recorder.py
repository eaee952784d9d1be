"""Recorder throughput: fake venue websocket -> parse -> stream -> recorder -> PostgreSQL.

Prints, in one run:
- ticks/s from the fake Binance USD-M venue's websocket (served from a child process)
  through the supervised stream (parse, consistency), the fan-out and the recorder
  (binary COPY) until every tick is committed;
- raw psycopg binary COPY rows/s of the same rows, in the same batch size, into the
  same table on the same database: the limit;
- the ratio of the two (target: at least 50%);
- for scale, frames/s a bare `websockets` client reads from the same fake venue with no
  parsing at all: the ceiling any per-frame Python path on this machine stays under.

Needs PostgreSQL: DATABASE_URL if it is one, else BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/tradingsite_bench, created and migrated if missing).
Run: .venv/bin/python bench/bench_recorder.py [--ticks N]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.postgres import ensure_database, use_bench_database  # noqa: E402

use_bench_database()

SYMBOLS = ("BTCUSDT", "ETHUSDT", "SOLUSDT")
BATCH = 5000


def _serve_venue(count: int, port_queue: multiprocessing.Queue[tuple[str, str]], stop_event) -> None:  # type: ignore[no-untyped-def]
    """Child process: serve the tape; release all of it once the stream has subscribed."""
    from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape

    async def main() -> None:
        async with FakeBinanceUsdm(make_tape(count, SYMBOLS, seed=3)) as venue:
            port_queue.put((venue.ws_url, venue.rest_url))
            while not venue.stats.subscribe_messages:
                await asyncio.sleep(0.005)
            venue.release(count)
            while not stop_event.is_set():
                await asyncio.sleep(0.05)

    asyncio.run(main())


async def _recorder_path(count: int, ws_url: str, rest_url: str) -> tuple[float, list[tuple]]:  # type: ignore[type-arg]
    from channels.db import database_sync_to_async

    from core.health import HealthBoard
    from feeds.distribution.fanout import FeedFanout, drain
    from feeds.models import Feed, Instrument, MarketType, Subscription, Tick
    from feeds.recording.database_writer import pipelined_writer_for_database
    from feeds.recording.recorder import TickRecorder
    from feeds.recording.tick_selectors import tick_addresses
    from feeds.streams.feed_streams import FeedStreamSettings, build_feed_streams
    from feeds.streams.venue_limiter import VenueRateLimiter
    from feeds.venues import get_venue
    from feeds.venues.base import FeedSpec, InstrumentSpec, PublishedLimits

    def setup() -> None:
        _truncate_ticks()
        Feed.objects.filter(name="bench").delete()
        feed = Feed.objects.create(
            name="bench",
            venue="binance-usdm",
            market_type=MarketType.PERPETUAL,
            settings={"ws_url": ws_url, "rest_url": rest_url},
        )
        for symbol in SYMBOLS:
            instrument = Instrument.objects.create(
                feed=feed, symbol=symbol, venue_symbol=symbol, tick_size="0.01", lot_size="0.001"
            )
            Subscription.objects.create(instrument=instrument)

    await database_sync_to_async(setup)()
    keys = await database_sync_to_async(tick_addresses)(["bench"])
    writer = await database_sync_to_async(pipelined_writer_for_database)()  # what runfeed records with
    recorder = TickRecorder(writer, keys, batch_size=BATCH, flush_interval_s=0.05, capacity=count + BATCH)
    fanout = FeedFanout()
    queue = fanout.subscribe("recorder", capacity=count + 1)
    adapter = get_venue("binance-usdm")
    spec = FeedSpec(
        "bench",
        "binance-usdm",
        adapter.clean_settings({"ws_url": ws_url, "rest_url": rest_url}),
        tuple(InstrumentSpec(s, "0.01", "0.001") for s in SYMBOLS),
    )
    unlimited = VenueRateLimiter(PublishedLimits(10**9, 1, 1, 10**6, 1, 10**6), fraction=1.0)
    [stream] = await build_feed_streams(
        spec,
        adapter,
        publish=fanout.publish,
        health=HealthBoard(),  # type: ignore[arg-type]
        limiter=unlimited,
        settings=FeedStreamSettings(),
    )
    tasks = [asyncio.create_task(drain("recorder", queue, recorder.consume)), asyncio.create_task(recorder.run())]
    stream_task = asyncio.create_task(stream.run())
    # The clock starts at the first trade, not the first frame: the subscription reply
    # comes first, and the venue only releases its tape after it.
    while stream.stats.trades == 0:
        await asyncio.sleep(0.0005)
    started = time.perf_counter()
    already = stream.stats.trades
    # A trade the stream delivers twice (a redial under load) is skipped by the tick
    # table's unique (instrument, trade id) and counted as a duplicate, not recorded.
    while recorder.stats.recorded + recorder.stats.duplicates < count:
        await asyncio.sleep(0.002)
    if recorder.stats.duplicates:
        print(f"  ({recorder.stats.duplicates} trades delivered twice were skipped as duplicates)", flush=True)
    elapsed = time.perf_counter() - started
    for task in (stream_task, *tasks):
        task.cancel()
    await asyncio.gather(stream_task, *tasks, return_exceptions=True)
    await recorder.close()  # stops the writer process
    rows = await database_sync_to_async(
        lambda: list(
            Tick.objects.order_by("pk").values_list(
                "instrument_id", "ts_event", "ts_recv", "price", "volume", "duration_since_last_ns", "trade_id", "side"
            )
        )
    )()
    # Trades already read when the clock started are not counted.
    return (count - already) / elapsed, rows


async def _bare_receive(count: int, ws_url: str) -> float:
    from websockets.asyncio.client import connect

    async with connect(f"{ws_url}/market/stream", proxy=None, max_queue=1024) as socket:
        await socket.send(
            '{"method":"SUBSCRIBE","params":["btcusdt@aggTrade","ethusdt@aggTrade","solusdt@aggTrade"],"id":1}'
        )
        await socket.recv()  # the subscription reply
        await socket.recv(decode=False)
        started = time.perf_counter()
        for _ in range(count - 1):
            await socket.recv(decode=False)
        return (count - 1) / (time.perf_counter() - started)


def _with_venue(count: int, run):  # type: ignore[no-untyped-def]
    """Serve a fresh fake venue from a child process (its own core) while `run(ws, rest)` runs."""
    context = multiprocessing.get_context("spawn")
    port_queue = context.Queue()
    stop_event = context.Event()
    child = context.Process(target=_serve_venue, args=(count, port_queue, stop_event), daemon=True)
    child.start()
    try:
        ws_url, rest_url = port_queue.get(timeout=30)
        return run(ws_url, rest_url)
    finally:
        stop_event.set()
        child.join(timeout=10)


def _raw_copy(rows: list[tuple]) -> float:  # type: ignore[type-arg]
    import psycopg

    from feeds.recording.tick_writer import postgres_conninfo

    dsn = postgres_conninfo()
    # price and volume are numeric(38,0): binary COPY needs each column's own type.
    # Spelled out rather than taken from feeds.recording.tick_writer: the limit stays independent
    # of the code it measures.
    statement = (
        "COPY feeds_tick (instrument_id, ts_event, ts_recv, price, volume, duration_since_last_ns, "
        "trade_id, side) FROM STDIN (FORMAT BINARY)"
    )
    with psycopg.connect(dsn) as conn:
        conn.execute("TRUNCATE feeds_tick")
        conn.commit()
        started = time.perf_counter()
        for start in range(0, len(rows), BATCH):
            with conn.cursor() as cursor, cursor.copy(statement) as copy:
                copy.set_types(["int8", "int8", "int8", "numeric", "numeric", "int8", "text", "text"])
                for row in rows[start : start + BATCH]:
                    copy.write_row(row)
            conn.commit()
        elapsed = time.perf_counter() - started
        conn.execute("TRUNCATE feeds_tick")
        conn.commit()
    return len(rows) / elapsed


def _truncate_ticks() -> None:
    """Empty the tick table without leaving dead rows: an autovacuum of 200,000 deleted
    ticks running during the next measurement would compete with it for the CPU."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE feeds_tick")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3, help="runs of the recorder path on each loop")
    args = parser.parse_args()

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from core.runtime.signals import run_fast

    # On a small machine the venue, the database and the path share the cores and a run
    # lands in a fast or a slow mode: alternate the loops, report every run, compare on
    # the median. uvloop (runfeed, runsite) goes last: the raw COPY writes its rows again
    # (their instruments still exist).
    default_rates, path_rates = [], []
    for _ in range(args.runs):
        rate, _rows = _with_venue(args.ticks, lambda ws, rest: asyncio.run(_recorder_path(args.ticks, ws, rest)))
        default_rates.append(rate)
        rate, rows = _with_venue(args.ticks, lambda ws, rest: run_fast(_recorder_path(args.ticks, ws, rest)))
        if len(rows) != args.ticks:
            raise SystemExit(f"recorded {len(rows)} ticks, expected {args.ticks}")
        path_rates.append(rate)
    path_rate = statistics.median(path_rates)
    copy_rates = [_raw_copy(rows) for _ in range(args.runs)]
    copy_rate = statistics.median(copy_rates)
    bare_rate = _with_venue(args.ticks, lambda ws, rest: run_fast(_bare_receive(args.ticks, ws)))
    print(
        f"recorder path (fake venue websocket -> parse -> stream -> recorder -> PostgreSQL COPY), "
        f"uvloop: {path_rate:,.0f} ticks/s over {args.ticks:,} ticks, median of "
        f"{', '.join(f'{rate:,.0f}' for rate in path_rates)}"
    )
    print(
        f"the same on asyncio's default loop (where uvloop is missing): {statistics.median(default_rates):,.0f} "
        f"ticks/s, median of {', '.join(f'{rate:,.0f}' for rate in default_rates)}"
    )
    print(
        f"raw psycopg binary COPY of the same rows, batches of {BATCH}: {copy_rate:,.0f} rows/s, median of "
        f"{', '.join(f'{rate:,.0f}' for rate in copy_rates)}"
    )
    print(f"recorder path / raw COPY: {path_rate / copy_rate:.0%} (target >= 50%)")
    print(
        f"bare websockets receive from the same fake venue, no parsing: {bare_rate:,.0f} frames/s "
        f"({bare_rate / copy_rate:.0%} of raw COPY)"
    )


if __name__ == "__main__":
    main()
