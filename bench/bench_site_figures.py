"""Cost of the site-wide figures (/metrics `site_*`, /internal/health `siteFigures`) on a large tick table.

Fills the tick table with N ticks over I instruments spread across two hours (one
INSERT ... SELECT generate_series), then prints the median time of one computation
(the five aggregate queries of tradingsite.site_figures, no cache) and the plan of the
tick query, which should read the index tick_instrument_ts, not scan the table.

Needs PostgreSQL: DATABASE_URL if it is one, else BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/tradingsite_bench, created and migrated if missing).
Run: .venv/bin/python bench/bench_site_figures.py [--ticks N] [--instruments I]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.postgres import ensure_database, use_bench_database  # noqa: E402

URL = use_bench_database()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=2_000_000)
    parser.add_argument("--instruments", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    ensure_database(URL)

    import django

    django.setup()
    from decimal import Decimal

    from django.core.management import call_command
    from django.db import connection

    from feeds.models import Feed, Instrument, MarketType, Tick
    from feeds.site_figures import feed_tick_figures
    from tradingsite.site_figures import compute_site_figures

    call_command("migrate", verbosity=0)
    Tick.objects.filter(instrument__feed__name__startswith="bench-").delete()
    Instrument.objects.filter(feed__name__startswith="bench-").delete()
    Feed.objects.filter(name__startswith="bench-").delete()
    feeds = [
        Feed.objects.create(name=f"bench-{n}", venue="simulated", market_type=MarketType.SIMULATED) for n in range(4)
    ]
    ids = [
        Instrument.objects.create(
            feed=feeds[n % len(feeds)],
            symbol=f"B{n}",
            venue_symbol=f"B{n}",
            tick_size=Decimal("0.1"),
            lot_size=Decimal("0.001"),
        ).pk
        for n in range(args.instruments)
    ]
    now_ns = time.time_ns()
    span_ns = 2 * 3600 * 1_000_000_000
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {Tick._meta.db_table} (instrument_id, ts_event, ts_recv, price, volume, trade_id, side)
            SELECT (%s::bigint[])[1 + (g %% %s)], %s - (g::bigint * %s / %s), %s, 1, 1, g::text, ''
            FROM generate_series(1, %s) AS g""",
            [ids, len(ids), now_ns, span_ns, args.ticks, now_ns, args.ticks],
        )
        cursor.execute(f"ANALYZE {Tick._meta.db_table}")
    print(f"filled {args.ticks:,} ticks over {len(ids)} instruments in {time.perf_counter() - started:.1f} s")

    timings = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        figures = compute_site_figures()
        timings.append(time.perf_counter() - t0)
    recent = sum(f.ticks_last_window for f in figures.feeds)
    print(
        f"site figures: median {statistics.median(timings) * 1000:.1f} ms, best {min(timings) * 1000:.1f} ms "
        f"over {args.runs} runs ({recent:,} ticks in the last minute)"
    )
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        feed_tick_figures(now_ns=now_ns)
    tick_query = ctx.captured_queries[-1]["sql"]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + tick_query)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    print("plan of the tick query:\n" + plan)
    print(
        "uses tick_instrument_ts:",
        "tick_instrument_ts" in plan,
        "| sequential scan of ticks:",
        "Seq Scan on feeds_tick" in plan,
    )


if __name__ == "__main__":
    main()
