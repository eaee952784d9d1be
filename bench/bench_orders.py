"""Orders: signal-to-order-acknowledged latency on the paper broker, and entries/s across 20 accounts.

Latency: one account, signals handled one after another; each is timed from the
signal's emission to the broker-acknowledged order persisted with its lifecycle
(entry lease, reservation with its intent, paper exchange order, lifecycle
transaction, lease release). Throughput, fan-out: 20 accounts trading the same
strategies, so each signal is an entry on all 20 (how signals reach accounts: one
strategy, every account that trades it); every signal published at once to the
SignalHub and drained by the TradeExecutor, timed until the last entry is
acknowledged. Throughput, one account per signal: the same 20 accounts, each with its
own strategies (every signal an entry on one account).

Each strategy trades its own instrument (one active entry per account and instrument
across strategies). The round trips (statements and commits, on every connection; the
statements the trade path sends together in one message count once) and
this process's CPU are counted per entry, and a bare psycopg loop doing the same round
trips is printed beside each: the floor of this database and machine.
BENCH_DB_THREADS=N runs the throughput parts on an N-thread database pool instead of
the loop's default. DEBUG is off unless set (as in production: with it on, Django logs
and keeps every statement); the channel layer is Redis's when REDIS_URL is set.

Needs PostgreSQL: BENCH_DATABASE_URL when set, else DATABASE_URL if it is one, else
postgres://postgres@127.0.0.1:5432/tradingsite_bench (created and migrated if missing).
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

use_bench_database(bench_url_first=True)
# Measured as it runs in production: DEBUG on makes every statement a logged, recorded one.
os.environ.setdefault("DEBUG", "0")
if os.environ["DEBUG"] in ("0", "false", "False", "off"):
    os.environ.setdefault("SECRET_KEY", "bench-orders-" + uuid.uuid4().hex)
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

    feed, _ = Feed.objects.get_or_create(
        name="bench-orders", defaults={"venue": "simulated", "market_type": MarketType.SIMULATED}
    )
    symbols = [f"BENCH{i}" for i in range(strategies_per_account)]
    for symbol in symbols:
        Instrument.objects.get_or_create(
            feed=feed,
            venue_symbol=symbol,
            defaults={"symbol": symbol, "tick_size": Decimal("0.1"), "lot_size": Decimal("0.001")},
        )
    result = []
    for n in range(accounts):
        user = get_user_model().objects.create_user(username=f"bench-{run}-{n}", password=None)
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


def _make_shared(run: str, accounts: int, strategies: int) -> list[tuple[int, str]]:
    """`strategies` strategies, each traded by every one of `accounts` new paper accounts; return (strategy id, symbol)."""
    from django.contrib.auth import get_user_model

    from feeds.models import Feed, Instrument, MarketType
    from orders.ledger import ledger_open
    from orders.models import Account, TradeSetting
    from processor.models import Strategy

    feed, _ = Feed.objects.get_or_create(
        name="bench-orders", defaults={"venue": "simulated", "market_type": MarketType.SIMULATED}
    )
    symbols = [f"BENCH{i}" for i in range(strategies)]
    for symbol in symbols:
        Instrument.objects.get_or_create(
            feed=feed,
            venue_symbol=symbol,
            defaults={"symbol": symbol, "tick_size": Decimal("0.1"), "lot_size": Decimal("0.001")},
        )
    shared = Strategy.objects.bulk_create(
        [
            Strategy(name=f"b{run}-shared-{i}", kind="ema", params={"timeframe_s": 60, "fast": 3, "slow": 5})
            for i in range(strategies)
        ]
    )
    for n in range(accounts):
        user = get_user_model().objects.create_user(username=f"bench-{run}-{n}", password=None)
        account = Account.objects.create(owner=user, name="bench", allocated_capital=Decimal("100000000"))
        ledger_open(account=account)
        TradeSetting.objects.bulk_create(
            [TradeSetting(strategy=s, account=account, quantity=Decimal("0.01"), mode="paper") for s in shared]
        )
    return [(s.pk, symbol) for s, symbol in zip(shared, symbols)]


def _signal(strategy_id: int, symbol: str, n: int):  # type: ignore[no-untyped-def]
    from feeds.market import parse_fixed
    from processor.signals import Signal, SignalKind

    return Signal(
        strategy_id=strategy_id,
        strategy_name=f"s{strategy_id}",
        feed="bench-orders",
        symbol=symbol,
        kind=SignalKind.ENTRY_LONG,
        price=parse_fixed("50000"),
        emitted_ns=time.time_ns(),
        occurrence_ns=1_764_460_800_000_000_000 + n,
        output_id=f"bench-{n}",
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
    from tradingsite.runtime.compose import entry_controls

    registry = BrokerRegistry()
    # The kill switches as the runtime wires them: consulted in every reserve transaction.
    controls = entry_controls()
    gates = {"entry_gate": controls.entry_gate}
    if getattr(controls, "entry_gate_many", None) is not None:
        gates["entry_gate_many"] = controls.entry_gate_many
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue="paper", mode="paper"),
        config=ExecutorConfig(),
        **gates,
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


class _Tally(dict[str, int]):
    """The executor's outcome counts, which wake the benchmark once `target` entries are acknowledged."""

    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target
        self.done = asyncio.Event()

    def __setitem__(self, name: str, count: int) -> None:
        super().__setitem__(name, count)
        if self.get("placed", 0) >= self.target or sum(self.values()) >= self.target:
            self.done.set()


async def _throughput(signals: list, placed: int) -> float:  # type: ignore[type-arg]
    """Publish `signals` at once to a SignalHub drained by a TradeExecutor; seconds until `placed` entries are acknowledged."""
    from processor.signals import SignalHub

    executor = _executor()
    # Woken by the last outcome rather than polled: a poll every few ms is CPU this
    # process would otherwise count against the executor.
    tally = executor.outcomes = _Tally(placed)
    hub = SignalHub()
    queue = hub.subscribe("trade-executor", capacity=100_000)
    if DB_THREADS:
        from concurrent.futures import ThreadPoolExecutor

        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(DB_THREADS))
    runner = asyncio.create_task(executor.run(queue))
    started = time.perf_counter()
    hub.publish(signals)
    await tally.done.wait()
    elapsed = time.perf_counter() - started
    runner.cancel()
    if tally.get("placed", 0) < placed:
        # A broker answer slower than the broker timeout is an `unknown` outcome, left to
        # reconciliation: said here, and the run goes on (its rate counts every outcome).
        print(f"  not every entry placed: outcomes {dict(tally)}")
    return elapsed


def _fanout_signals(pairs: list[tuple[int, str]]) -> list:  # type: ignore[type-arg]
    return [_signal(sid, symbol, 2_000_000 + i) for i, (sid, symbol) in enumerate(pairs)]


def _own_signals(strategies: list[list[tuple[int, str]]]) -> list:  # type: ignore[type-arg]
    signals = [
        _signal(sid, symbol, 1_000_000 + i * 1000 + j)
        for j, pairs in enumerate(strategies)
        for i, (sid, symbol) in enumerate(pairs)
    ]
    # Interleave accounts, as signals of many strategies arrive mixed.
    signals.sort(key=lambda s: s.occurrence_ns % 1000 * 10_000 + s.occurrence_ns // 1000)
    return signals


class Measured:
    """Round trips and CPU of this process over one part of the run, per entry."""

    def __init__(self, trips: RoundTrips) -> None:
        self.trips = trips

    def __enter__(self) -> Measured:
        self.statements, self.commits = self.trips.statements, self.trips.commits
        self.cpu = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.statements = self.trips.statements - self.statements
        self.commits = self.trips.commits - self.commits
        self.cpu = time.process_time() - self.cpu

    def per_entry(self, entries: int) -> str:
        return (
            f"{self.statements / entries:.1f} statement round trips and {self.commits / entries:.2f} commits per entry; "
            f"{self.cpu * 1000 / entries:.2f} ms of this process's CPU per entry"
        )


def _bare_unit(conn, statements: int, commits: int) -> None:  # type: ignore[no-untyped-def]
    """One unit's worth of round trips: `statements` statements in `commits` committed transactions."""
    commits = max(commits, 1)
    per_commit = max(statements // commits, 1)
    done = 0
    for _ in range(commits):
        conn.execute("INSERT INTO bench_round_trips (v) VALUES (1)")
        for _ in range(per_commit - 1):
            conn.execute("SELECT 1")
        done += per_commit
        conn.commit()
    for _ in range(statements - done):
        conn.execute("SELECT 1")
    if statements > done:
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


def _bare_psycopg(url: str, statements: int, commits: int, units: int, connections: int) -> tuple[list[float], float]:
    """The floor: a bare psycopg loop doing a unit's round trips; per-unit latencies (ms), units/s on `connections`."""
    import threading

    import psycopg

    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute("CREATE TABLE IF NOT EXISTS bench_round_trips (id bigserial PRIMARY KEY, v int)")
    samples = []
    with psycopg.connect(url) as conn:
        for _ in range(units):
            started = time.perf_counter()
            _bare_unit(conn, statements, commits)
            samples.append((time.perf_counter() - started) * 1000)
    per_connection = max(units // connections, 1)

    def worker(count: int) -> None:
        with psycopg.connect(url) as conn:
            for _ in range(count):
                _bare_unit(conn, statements, commits)

    threads = [threading.Thread(target=worker, args=(per_connection,)) for _ in range(connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return samples, per_connection * connections / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-signals", type=int, default=300)
    parser.add_argument("--accounts", type=int, default=20)
    parser.add_argument("--entries-per-account", type=int, default=25)
    parser.add_argument(
        "--skip-own", action="store_true", help="leave out the one-account-per-signal part (the longest run)"
    )
    args = parser.parse_args()

    url = os.environ["DATABASE_URL"]
    ensure_database(url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from channels.layers import get_channel_layer
    from django.conf import settings

    import tradingsite.runtime.compose  # noqa: F401  # imported once here, not inside a measured part
    from core.schedule import periodic_jobs

    # The metadata age an entry is checked against comes from the periodic job
    # schedule, whose first read imports every app's tasks module: a running runtime
    # has done that at its start, so it happens here, not inside the first entry.
    periodic_jobs()

    print(f"settings: DEBUG {settings.DEBUG}, channel layer {type(get_channel_layer()).__name__}")
    run = uuid.uuid4().hex[:8]
    [latency_ids] = _make_accounts(run + "l", 1, args.latency_signals)
    shared_ids = _make_shared(run + "f", args.accounts, args.entries_per_account)
    own_ids = [] if args.skip_own else _make_accounts(run + "t", args.accounts, args.entries_per_account)
    entries = args.accounts * args.entries_per_account

    trips = RoundTrips()
    trips.install()
    with Measured(trips) as one:
        samples = asyncio.run(_latency(latency_ids))
    quantiles = statistics.quantiles(samples, n=100)
    print(
        f"signal -> order acknowledged (paper broker, PostgreSQL), {len(samples)} entries one at a time: "
        f"p50 {quantiles[49]:.1f} ms, p99 {quantiles[98]:.1f} ms, max {max(samples):.1f} ms "
        f"({one.per_entry(len(samples))})"
    )
    statements, commits = round(one.statements / len(samples)), round(one.commits / len(samples))
    bare, _ = _bare_psycopg(url, statements, commits, len(samples), 1)
    bare_q = statistics.quantiles(bare, n=100)
    print(
        f"  bare psycopg loop, the same {statements} statement round trips and {commits} commits per entry: "
        f"p50 {bare_q[49]:.1f} ms, p99 {bare_q[98]:.1f} ms one at a time"
    )

    with Measured(trips) as fan:
        elapsed = asyncio.run(_throughput(_fanout_signals(shared_ids), entries))
    print(
        f"entries across {args.accounts} accounts, each signal on all {args.accounts} (fan-out): "
        f"{entries / elapsed:,.0f} entries/s ({entries} entries from {len(shared_ids)} signals in {elapsed:.2f} s; "
        f"{fan.per_entry(entries)})"
    )
    per_signal_statements = round(fan.statements / len(shared_ids))
    per_signal_commits = round(fan.commits / len(shared_ids))
    units = max(len(shared_ids), 40)
    _, bare_rate = _bare_psycopg(url, per_signal_statements, per_signal_commits, units, min(args.accounts, units))
    print(
        f"  bare psycopg loop, the same {per_signal_statements} statement round trips and {per_signal_commits} commits per "
        f"signal of {args.accounts} entries: {bare_rate * args.accounts:,.0f} entries/s on {min(args.accounts, units)} connections"
    )

    if own_ids:
        with Measured(trips) as own:
            elapsed = asyncio.run(_throughput(_own_signals(own_ids), entries))
        print(
            f"entries across {args.accounts} accounts, each signal on one account: {entries / elapsed:,.0f} entries/s "
            f"({entries} entries in {elapsed:.2f} s; {own.per_entry(entries)})"
        )
        statements, commits = round(own.statements / entries), round(own.commits / entries)
        _, bare_rate = _bare_psycopg(url, statements, commits, entries, args.accounts)
        print(
            f"  bare psycopg loop, the same {statements} statement round trips and {commits} commits per entry: "
            f"{bare_rate:,.0f} entries/s on {args.accounts} connections"
        )

    floor = statistics.quantiles(_commit_floor(url, len(samples)), n=100)
    print(
        f"bare psycopg insert + commit (the server's durable-commit floor): p50 {floor[49]:.2f} ms, p99 {floor[98]:.2f} ms"
    )


if __name__ == "__main__":
    main()
