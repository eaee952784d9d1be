"""Time of the chart history endpoint with 10 million recorded ticks on PostgreSQL.

Fills the tick table with N ticks (default 10,000,000) over I instruments (default 5),
one tick per instrument every 250 ms back from now (one INSERT ... SELECT
generate_series; kept between runs: a second run with the same figures reuses them),
then asks /dashboard/charts/<id>/history/ as a logged-in user, through the whole Django
stack, for each timeframe at the default 500 bars and prints the median time, the bars
and the ticks aggregated, and the plan of the aggregate query.

Needs PostgreSQL: DATABASE_URL if it is one, else BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/tradingsite_bench, created and migrated if missing).
Run: .venv/bin/python bench/bench_chart_history.py [--ticks N] [--instruments I] [--runs R]
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
TICK_NS = 250_000_000
FEED = "bench-chart"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=10_000_000)
    parser.add_argument("--instruments", type=int, default=5)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    ensure_database(URL)

    import django

    django.setup()
    from decimal import Decimal

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from feeds.models import Feed, Instrument, MarketType, Subscription, Tick

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    call_command("migrate", verbosity=0)
    feed, _ = Feed.objects.get_or_create(
        name=FEED, defaults={"venue": "simulated", "market_type": MarketType.SIMULATED}
    )
    ids = []
    for n in range(args.instruments):
        instrument, _ = Instrument.objects.get_or_create(
            feed=feed,
            venue_symbol=f"C{n}",
            defaults={"symbol": f"C{n}", "tick_size": Decimal("0.01"), "lot_size": Decimal("0.001")},
        )
        Subscription.objects.get_or_create(instrument=instrument, channel="trades")
        ids.append(instrument.pk)
    table = Tick._meta.db_table
    have = Tick.objects.filter(instrument_id__in=ids).count()
    newest = Tick.objects.filter(instrument_id=ids[0]).order_by("-ts_event").values_list("ts_event", flat=True).first()
    now_ns = time.time_ns()
    if have != args.ticks or newest is None:
        Tick.objects.filter(instrument_id__in=ids).delete()
        started = time.perf_counter()
        with connection.cursor() as cursor:
            # Instrument g % I; each instrument's ticks 250 ms apart back from now; prices
            # wander over 100.00 .. 109.99, one unit of volume each.
            cursor.execute(
                f"""INSERT INTO {table} (instrument_id, ts_event, ts_recv, price, volume, trade_id, side)
                SELECT (%s::bigint[])[1 + (g %% %s)], %s - (g / %s)::bigint * %s, %s,
                       100000000000000 + ((g * 7919) %% 1000)::bigint * 10000000000, 1000000000000, g::text, ''
                FROM generate_series(0::bigint, %s - 1) AS g""",
                [ids, len(ids), now_ns, len(ids), TICK_NS, now_ns, args.ticks],
            )
            cursor.execute(f"VACUUM ANALYZE {table}")
        print(f"filled {args.ticks:,} ticks over {len(ids)} instruments in {time.perf_counter() - started:.1f} s")
        newest = now_ns
    else:
        print(f"reusing {have:,} recorded ticks over {len(ids)} instruments")
    span_s = (args.ticks // len(ids)) * TICK_NS / 1e9
    print(f"each instrument: {args.ticks // len(ids):,} ticks over {span_s / 86400:.1f} days (one per 250 ms)")

    user, _ = get_user_model().objects.get_or_create(username="bench-chart")
    client = Client()
    client.force_login(user)
    end_ms = newest // 1_000_000 + 1
    url = f"/dashboard/charts/{ids[0]}/history/"
    for timeframe in ("1s", "5s", "1m", "5m", "15m", "1h"):
        timings = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            response = client.get(url, {"timeframe": timeframe, "end": end_ms})
            timings.append(time.perf_counter() - t0)
            assert response.status_code == 200, response.content[:200]
        bars = response.json()["bars"]
        ticks = sum(bar["trades"] for bar in bars)
        print(
            f"history {timeframe:>3} x 500 bars: median {statistics.median(timings) * 1000:7.1f} ms, "
            f"best {min(timings) * 1000:7.1f} ms ({len(bars)} bars from {ticks:,} ticks)"
        )
    with CaptureQueriesContext(connection) as ctx:
        client.get(url, {"timeframe": "1m", "end": end_ms})
    aggregate = next(q["sql"] for q in ctx.captured_queries if "GROUP BY" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + aggregate)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    print("plan of the 1m aggregate:\n" + plan)


if __name__ == "__main__":
    main()
