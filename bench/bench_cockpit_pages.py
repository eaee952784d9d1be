"""Time to render the closed-trade and performance pages (and their API routes) for an
account with 100,000 fills on PostgreSQL.

Seeds one user's account with F fills: F/2 closed round trips (an entry and an exit
order of one fill each, their intents, positions with their trade figures and two ledger
journal rows per fill) over four instruments and three strategies, one trade every five
minutes (about six months), written with INSERT ... SELECT generate_series. Then
prints the median and the slowest of R renders of each page through Django's test
client (the whole request: middleware, queries, template), the query count, and the
time to stream the whole CSV. Target: under 300 ms each (the CSV is a download, not a page).

Needs PostgreSQL: DATABASE_URL if it is one, else BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/tradingsite_bench, created and migrated if missing).
Run: .venv/bin/python bench/bench_cockpit_pages.py [--fills N] [--runs R]
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
USERNAME = "bench-cockpit"
SCALE = 10**12


def _seed(fills: int) -> tuple[object, dict[str, int]]:
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from feeds.models import Feed, Instrument, MarketType
    from orders.ledger import ledger_open
    from orders.models import Account, Fill, LedgerEntry, Order, OrderIntent, Position
    from processor.models import Strategy

    user_model = get_user_model()
    existing = Account.objects.filter(owner__username=USERNAME).first()
    if existing is not None and Fill.objects.filter(account=existing).count() == fills // 2 * 2:
        strategy = Position.objects.filter(account=existing).values_list("strategy_id", flat=True).first()
        print(f"reusing the seeded account ({fills // 2 * 2:,} fills)")
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM ANALYZE {Position._meta.db_table}")
        return existing.owner, {"strategy": strategy or 0, "account": existing.pk}
    old = Account.objects.filter(owner__username=USERNAME).values_list("pk", flat=True)
    with connection.cursor() as cursor:
        for model in (Fill, Order, OrderIntent, Position, LedgerEntry):
            cursor.execute(f"DELETE FROM {model._meta.db_table} WHERE account_id = ANY(%s)", [list(old)])
    Account.objects.filter(pk__in=list(old)).delete()
    user_model.objects.filter(username=USERNAME).delete()
    user = user_model.objects.create_user(USERNAME, password="bench-password-123")
    account = Account.objects.create(owner=user, name="bench", allocated_capital=Decimal(1_000_000))
    ledger_open(account=account)
    feed, _ = Feed.objects.get_or_create(
        name="bench-cockpit", defaults={"venue": "simulated", "market_type": MarketType.SIMULATED}
    )
    instruments = [
        Instrument.objects.get_or_create(
            feed=feed,
            venue_symbol=f"BC{n}",
            defaults={"symbol": f"BC{n}", "tick_size": Decimal("0.01"), "lot_size": Decimal("0.001")},
        )[0].pk
        for n in range(4)
    ]
    strategies = [
        Strategy.objects.get_or_create(name=f"bench-cockpit-{n}", defaults={"kind": "ema", "params": {}})[0].pk
        for n in range(3)
    ]
    trips = fills // 2
    a = account.pk
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        # P&L from -10 to +10 in steps of 0.01, fees 0.02 a fill; entry at 100, quantity 1.
        cursor.execute(
            f"""INSERT INTO {Position._meta.db_table} (account_id, strategy_id, instrument_id, side, quantity, cost,
                locked, realized_pnl, state, opened_at, closed_at, entry_quantity, entry_notional, exit_quantity,
                exit_notional, fees, entry_at, exit_at, exit_reason)
            SELECT %(a)s, (%(s)s::bigint[])[1 + g %% 3], (%(i)s::bigint[])[1 + g %% 4],
                CASE WHEN g %% 5 = 0 THEN 'SHORT' ELSE 'LONG' END, 0, 0, 0, pnl, 'CLOSED', t, t + interval '3 minutes',
                %(one)s, 100 * %(one)s::numeric, %(one)s, 100 * %(one)s::numeric + pnl + 4 * %(cent)s::numeric,
                4 * %(cent)s::numeric, t, t + interval '3 minutes', 'EXIT_LONG'
            FROM (SELECT g, ((g * 7919) %% 2001 - 1000) * %(cent)s::numeric AS pnl,
                         timestamptz '2026-01-01 00:00:00+00' + g * interval '5 minutes' AS t
                  FROM generate_series(1, %(n)s) AS g) AS s""",
            {"a": a, "s": strategies, "i": instruments, "n": trips, "one": SCALE, "cent": SCALE // 100},
        )
        cursor.execute(
            f"""INSERT INTO {OrderIntent._meta.db_table} (client_order_id, account_id, strategy_id, instrument_id,
                intent, position_side, side, order_type, quantity, price, reserved, state, signal_kind,
                signal_output_id, created_at, updated_at)
            SELECT 'bc-' || p.id || '-' || k.intent, p.account_id, p.strategy_id, p.instrument_id, k.intent, p.side,
                CASE WHEN k.intent = 'ENTRY' THEN 'BUY' ELSE 'SELL' END, 'MARKET', %(one)s, 100 * %(one)s::numeric, 0,
                'PLACED', k.intent || '_LONG', p.id::text, p.entry_at, p.entry_at
            FROM {Position._meta.db_table} p CROSS JOIN (VALUES ('ENTRY'), ('EXIT')) AS k(intent)
            WHERE p.account_id = %(a)s""",
            {"a": a, "one": SCALE},
        )
        cursor.execute(
            f"""INSERT INTO {Order._meta.db_table} (client_order_id, exchange_order_id, intent_row_id, account_id,
                strategy_id, instrument_id, position_id, intent, side, order_type, quantity, price, status,
                filled_quantity, filled_notional, reserved, reserve_released, via_reconciliation, created_at, updated_at)
            SELECT i.client_order_id, 'x-' || i.client_order_id, i.id, i.account_id, i.strategy_id, i.instrument_id,
                i.signal_output_id::bigint, i.intent, i.side, 'MARKET', i.quantity, i.price, 'FILLED', i.quantity,
                100 * %(one)s::numeric, 0, 0, false, i.created_at, i.created_at
            FROM {OrderIntent._meta.db_table} i WHERE i.account_id = %(a)s""",
            {"a": a, "one": SCALE},
        )
        cursor.execute(
            f"""INSERT INTO {Fill._meta.db_table} (account_id, order_id, exchange_trade_id, quantity, price, fee,
                ts_event, via_reconciliation, created_at)
            SELECT o.account_id, o.id, 'f-' || o.id, o.quantity, o.price, 2 * %(cent)s::numeric,
                (extract(epoch FROM o.created_at) * 1000000000)::bigint, false, o.created_at
            FROM {Order._meta.db_table} o WHERE o.account_id = %(a)s""",
            {"a": a, "cent": SCALE // 100},
        )
        cursor.execute(
            f"""INSERT INTO {LedgerEntry._meta.db_table} (account_id, kind, delta_allocated, delta_reserved_for_orders,
                delta_reserved_for_positions, delta_realized_pnl, client_order_id, exchange_trade_id, reason, created_at)
            SELECT f.account_id, k.kind, 0, 0, 0, CASE WHEN k.kind = 'fee' THEN -f.fee ELSE 0 END,
                'x', f.exchange_trade_id, '', f.created_at
            FROM {Fill._meta.db_table} f CROSS JOIN (VALUES ('fee'), ('entry_fill')) AS k(kind)
            WHERE f.account_id = %(a)s""",
            {"a": a},
        )
    # VACUUM (outside the seeding transaction) sets the visibility map autovacuum would set on
    # a live site, so closed trades are read from their covering index alone.
    with connection.cursor() as cursor:
        for model in (Position, OrderIntent, Order, Fill, LedgerEntry):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    count = Fill.objects.filter(account=account).count()
    print(f"seeded {count:,} fills ({trips:,} closed trades) in {time.perf_counter() - started:.1f} s")
    return user, {"strategy": strategies[0], "account": a}


def _time(client: object, path: str, runs: int) -> tuple[float, float, int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    timings = []
    status = 0
    queries = 0
    for _ in range(runs):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(path)  # type: ignore[attr-defined]
            if getattr(response, "streaming", False):
                for _chunk in response.streaming_content:
                    pass
            timings.append((time.perf_counter() - started) * 1000)
        status, queries = response.status_code, len(captured)
    return statistics.median(timings), max(timings), status, queries


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fills", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    ensure_database(URL)

    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    user, ids = _seed(args.fills)
    client = Client(HTTP_HOST="127.0.0.1")  # a host the default ALLOWED_HOSTS admits
    client.force_login(user)  # type: ignore[arg-type]
    pages = [
        "/trades/",
        "/trades/?page=400",
        f"/trades/?strategy={ids['strategy']}&symbol=BC1&result=win&since=2026-02-01&until=2026-04-30",
        "/performance/",
        f"/performance/?strategy={ids['strategy']}&since=2026-03-01",
        "/api/trades/",
        "/api/trades/?symbol=BC2&side=SHORT&offset=5000",
        "/api/performance/",
        f"/api/performance/?account={ids['account']}&result=loss",
    ]
    client.get("/trades/")  # first request: URL conf, templates
    print(f"{'page':<92} {'median ms':>9} {'max ms':>8} {'queries':>7} status")
    for path in pages:
        median, slowest, status, queries = _time(client, path, args.runs)
        print(f"{path:<92} {median:>9.1f} {slowest:>8.1f} {queries:>7} {status}")
    median, slowest, status, _ = _time(client, "/trades/export.csv", 1)
    print(
        f"{'/trades/export.csv (the whole history, streamed; a download)':<92} {median:>9.1f} {slowest:>8.1f} {'':>7} {status}"
    )


if __name__ == "__main__":
    main()
