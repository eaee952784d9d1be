"""Orders: signal-to-order-acknowledged latency on the paper broker, and entries/s across 20 accounts.

Latency: one account, signals handled one after another; each is timed from the
signal's emission to the broker-acknowledged order persisted with its lifecycle
(entry lock, reservation with its intent, paper exchange order, lifecycle
transaction, lock release). Throughput: 20 accounts, every signal published at once
to the SignalHub and drained by the TradeExecutor (concurrent across accounts,
serialized per strategy and symbol), timed until the last entry is acknowledged.

Each strategy trades its own instrument (one active entry per account and instrument
across strategies). The round trips of an entry (statements and commits, on every
connection) are counted, and a bare psycopg loop doing the same round trips is printed
beside: the floor of this database and machine. BENCH_DB_THREADS=N runs the
throughput part on an N-thread database pool instead of the loop's default.

Needs PostgreSQL: DATABASE_URL if it is one, else BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/tradingsite_bench, created and migrated if missing).
Run: .venv/bin/python bench/bench_orders.py   (prints figures; asserts nothing about time)
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.postgres import ensure_database, use_bench_database  # noqa: E402

use_bench_database()
DB_THREADS = int(os.environ.get("BENCH_DB_THREADS", "0"))  # 0: the loop's default pool



def _make_accounts(run: str, accounts: int, strategies_per_account: int) -> list[list[tuple[int, str]]]:
    """Create `accounts` paper accounts, each trading its own strategies; return (strategy id, symbol) per account.

    One active entry per account and instrument holds across strategies, so strategy i
    of every account trades its own instrument BENCH<i>.
    """
    from django.contrib.auth import get_user_model

    from feeds.models import Feed, Instrument, MarketType
    from orders.ledger import ledger_open
    from orders.models import Account, TradeSetting
    from processor.models import Strategy

    feed, _ = Feed.objects.get_or_create(name="bench-orders", defaults={"venue": "simulated", "market_type": MarketType.SIMULATED})
    symbols = [f"BENCH{i}" for i in range(strategies_per_account)]
    for symbol in symbols:
        Instrument.objects.get_or_create(
            feed=feed, venue_symbol=symbol, defaults={"symbol": symbol, "tick_size": Decimal("0.1"), "lot_size": Decimal("0.001")}
        )
    result = []
    for n in range(accounts):
        user = get_user_model().objects.create_user(username=f"bench-{run}-{n}", password=uuid.uuid4().hex)
        account = Account.objects.create(owner=user, name="bench", allocated_capital=Decimal("100000000"))
        ledger_open(account=account)
        strategies = Strategy.objects.bulk_create(
            [
                Strategy(name=f"b{run}-{n}-{i}", kind="ema", params={"timeframe_s": 60, "fast": 3, "slow": 5})
                for i in range(strategies_per_account)
            ]
        )
        TradeSetting.objects.bulk_create(
            [TradeSetting(strategy=s, account=account, quantity=Decimal("0.01"), mode="paper") for s in strategies]
        )
        result.append([(s.pk, symbol) for s, symbol in zip(strategies, symbols)])
    return result


def _signal(strategy_id: int, symbol: str, n: int):  # type: ignore[no-untyped-def]
    from feeds.market import parse_fixed
    from processor.signals import Signal, SignalKind

    return Signal(
        strategy_id=strategy_id, strategy_name=f"s{strategy_id}", feed="bench-orders", symbol=symbol,
        kind=SignalKind.ENTRY_LONG, price=parse_fixed("50000"), emitted_ns=time.time_ns(),
        occurrence_ns=1_764_460_800_000_000_000 + n, output_id=f"bench-{n}",
    )


class RoundTrips:
    """Counts the database round trips of every connection (statements and commits), for the comparison loop."""

    def __init__(self) -> None:
        self.statements = 0
        self.commits = 0

    def install(self) -> None:
        from django.db.backends.base.base import BaseDatabaseWrapper
        from django.db.backends.signals import connection_created

        def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
            self.statements += 1
            return execute(sql, params, many, context)

        def on_connect(sender, connection, **kwargs):  # type: ignore[no-untyped-def]
            if count not in connection.execute_wrappers:
                connection.execute_wrappers.append(count)

        connection_created.connect(on_connect, weak=False)
        original = BaseDatabaseWrapper._commit
        trips = self

        def commit(wrapper):  # type: ignore[no-untyped-def]
            trips.commits += 1
            return original(wrapper)

        BaseDatabaseWrapper._commit = commit  # type: ignore[method-assign]
        # A health check (Django's SELECT 1 before a connection's next use) is a round trip too.
        from django.db.backends.postgresql.base import DatabaseWrapper

        usable = DatabaseWrapper.is_usable

        def is_usable(wrapper):  # type: ignore[no-untyped-def]
            trips.statements += 1
            return usable(wrapper)

        DatabaseWrapper.is_usable = is_usable  # type: ignore[method-assign]


def _executor():  # type: ignore[no-untyped-def]
    from orders.brokers.registry import BrokerRegistry
    from orders.executor import ExecutorConfig, TradeExecutor

    registry = BrokerRegistry()
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue="paper", mode="paper"),
        config=ExecutorConfig(),
    )


async def _latency(strategies: list[tuple[int, str]]) -> list[float]:
    executor = _executor()
    samples = []
    for n, (strategy_id, symbol) in enumerate(strategies):
        signal = _signal(strategy_id, symbol, n)
        outcome = await executor.handle(signal)
        samples.append((time.time_ns() - signal.emitted_ns) / 1e6)
        if outcome != ["placed"]:
            raise SystemExit(f"latency run: unexpected outcome {outcome}")
    return samples


async def _throughput(strategies: list[list[tuple[int, str]]]) -> tuple[int, float]:
    from processor.signals import SignalHub

    executor = _executor()
    hub = SignalHub()
    queue = hub.subscribe("trade-executor", capacity=100_000)
    signals = [
        _signal(sid, symbol, 1_000_000 + i * 1000 + j)
        for j, pairs in enumerate(strategies)
        for i, (sid, symbol) in enumerate(pairs)
    ]
    # Interleave accounts, as signals of many strategies arrive mixed.
    signals.sort(key=lambda s: s.occurrence_ns % 1000 * 10_000 + s.occurrence_ns // 1000)
    if DB_THREADS:
        from concurrent.futures import ThreadPoolExecutor

        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(DB_THREADS))
    runner = asyncio.create_task(executor.run(queue))
    started = time.perf_counter()
    hub.publish(signals)
    while executor.outcomes.get("placed", 0) < len(signals):
        if sum(executor.outcomes.values()) >= len(signals):
            raise SystemExit(f"throughput run: outcomes {executor.outcomes}")
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - started
    runner.cancel()
    return len(signals), elapsed


def _bare_entry(conn, statements: int, commits: int) -> None:  # type: ignore[no-untyped-def]
    """One entry's worth of round trips: `statements` statements in `commits` committed transactions."""
    per_commit = max(statements // max(commits, 1), 1)
    done = 0
    for _ in range(max(commits, 1)):
        conn.execute("INSERT INTO bench_round_trips (v) VALUES (1)")
        for _ in range(per_commit - 1):
            conn.execute("SELECT 1")
        done += per_commit
        conn.commit()
    for _ in range(statements - done):
        conn.execute("SELECT 1")
    conn.commit()


def _commit_floor(url: str, count: int) -> list[float]:
    """The server's floor for one durable transaction: one insert and its commit, per sample (ms)."""
    import psycopg

    samples = []
    with psycopg.connect(url) as conn:
        for _ in range(count):
            started = time.perf_counter()
            conn.execute("INSERT INTO bench_round_trips (v) VALUES (1)")
            conn.commit()
            samples.append((time.perf_counter() - started) * 1000)
    return samples


def _bare_psycopg(url: str, statements: int, commits: int, entries: int, connections: int) -> tuple[list[float], float]:
    """The floor: a bare psycopg loop doing an entry's round trips; per-entry latencies (ms), entries/s on `connections`."""
    import threading

    import psycopg

    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE IF NOT EXISTS bench_round_trips (id bigserial PRIMARY KEY, v int)")
    samples = []
    with psycopg.connect(url) as conn:
        for _ in range(entries):
            started = time.perf_counter()
            _bare_entry(conn, statements, commits)
            samples.append((time.perf_counter() - started) * 1000)

    def worker(count: int) -> None:
        with psycopg.connect(url) as conn:
            for _ in range(count):
                _bare_entry(conn, statements, commits)

    threads = [threading.Thread(target=worker, args=(entries // connections,)) for _ in range(connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return samples, (entries // connections) * connections / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-signals", type=int, default=300)
    parser.add_argument("--accounts", type=int, default=20)
    parser.add_argument("--entries-per-account", type=int, default=25)
    args = parser.parse_args()

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    run = uuid.uuid4().hex[:8]
    [latency_ids] = _make_accounts(run + "l", 1, args.latency_signals)
    throughput_ids = _make_accounts(run + "t", args.accounts, args.entries_per_account)

    trips = RoundTrips()
    trips.install()
    cpu_started = time.process_time()
    samples = asyncio.run(_latency(latency_ids))
    cpu_ms = (time.process_time() - cpu_started) * 1000 / len(samples)
    statements = round(trips.statements / len(samples))
    commits = round(trips.commits / len(samples))
    quantiles = statistics.quantiles(samples, n=100)
    print(
        f"signal -> order acknowledged (paper broker, PostgreSQL), {len(samples)} entries one at a time: "
        f"p50 {quantiles[49]:.1f} ms, p99 {quantiles[98]:.1f} ms, max {max(samples):.1f} ms "
        f"({statements} statements and {commits} commits per entry; {cpu_ms:.1f} ms of this process's CPU per entry)"
    )
    count, elapsed = asyncio.run(_throughput(throughput_ids))
    print(f"entries across {args.accounts} accounts through the SignalHub: {count / elapsed:,.0f} entries/s "
          f"({count} entries in {elapsed:.2f} s)")
    bare, bare_rate = _bare_psycopg(
        os.environ["DATABASE_URL"], statements, commits, len(samples), min(args.accounts, len(samples))
    )
    bare_q = statistics.quantiles(bare, n=100)
    print(
        f"bare psycopg loop, the same {statements} statements and {commits} commits per entry: "
        f"p50 {bare_q[49]:.1f} ms, p99 {bare_q[98]:.1f} ms one at a time; "
        f"{bare_rate:,.0f} entries/s on {min(args.accounts, len(samples))} connections"
    )
    floor = statistics.quantiles(_commit_floor(os.environ["DATABASE_URL"], len(samples)), n=100)
    print(f"bare psycopg insert + commit (the server's durable-commit floor): p50 {floor[49]:.2f} ms, p99 {floor[98]:.2f} ms")


if __name__ == "__main__":
    main()
