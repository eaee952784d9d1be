"""Cross-process safety on PostgreSQL: racing runtimes, SIGKILL at each entry step, concurrent ledger writes.

Each test runs real processes (or threads with their own connections) against the
test database, then checks the invariants: at most one order per signal and account,
never more reserved than allocated, a journal that adds up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal as signals
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import close_old_connections, connection

from core.fixed_point import SCALE
from orders.brokers.paper import PaperFees, paper_match
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import InsufficientCapital, ledger_check
from orders.lifecycle import intent_abandon, intent_create
from orders.models import CapitalLedger, Fill, Order, OrderIntent, PaperFill, PaperOrder, SignalOutcome
from orders.models.outcomes import Outcome
from orders.reconciliation import reconcile_account
from processor.signals import Signal, SignalKind
from tests.fakes.brokers.binance_usdm_orders import FakeBinanceOrders
from tests.helpers import eventually
from tests.orders.factories import make_setup, make_signal, market_entry_spec, tick

pytestmark = [pytest.mark.needs_postgres, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _spawn(signals_in: list[Signal], **options: object) -> subprocess.Popen[str]:
    payload = {"signals": [{**dataclasses.asdict(s), "kind": str(s.kind)} for s in signals_in], **options}
    env = {**os.environ, "DATABASE_URL": _database_url()}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.orders.executor_child", json.dumps(payload)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_line(child: subprocess.Popen[str]) -> str:
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line:
        raise AssertionError(f"child exited {child.wait()}: {child.stderr.read() if child.stderr else ''}")
    return line.strip()


@pytest.fixture
def venue() -> Iterator[FakeBinanceOrders]:
    with FakeBinanceOrders() as fake:
        yield fake


def test_two_runtime_processes_racing_on_the_same_signal_place_one_order(venue: FakeBinanceOrders) -> None:
    setup = make_setup(broker="binance-usdm", mode="sandbox", quantity="0.01")
    signals_in = [make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000") for _ in range(3)]
    children = [_spawn(signals_in, broker="binance", fapi_url=venue.base_url, gated=True) for _ in range(2)]
    try:
        for child in children:
            assert _read_line(child) == "ready"
        for signal in signals_in:
            for child in children:  # release both at once
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
            outcomes = [o for child in children for o in json.loads(_read_line(child))]
            assert outcomes.count("placed") == 1, outcomes
            [cid] = OrderIntent.objects.filter(signal_output_id=signal.output_id).values_list(
                "client_order_id", flat=True
            )
            assert Order.objects.filter(client_order_id=cid).count() == 1
            assert cid in venue.orders
            # Close this entry at the venue so the next signal may enter again.
            venue.orders[cid].status = "CANCELED"
            asyncio.run(_reconcile_binance(setup.account.pk, venue))
    finally:
        for child in children:
            child.communicate(timeout=30)
    assert venue.place_requests == 3  # the loser of each race never reached the broker
    assert ledger_check(account_id=setup.account.pk).ok


async def _reconcile_binance(account_id: int, venue: FakeBinanceOrders) -> None:
    from orders.brokers.binance_usdm import BinanceUsdmBroker
    from tests.fakes.brokers.binance_usdm_orders import API_KEY, API_SECRET

    broker = BinanceUsdmBroker(api_key=API_KEY, secret=API_SECRET, demo=True, fapi_url=venue.base_url)
    try:
        await reconcile_account(account_id=account_id, broker=broker, prefix="ts", lock_ttl_s=1.0)
    finally:
        await broker.close()


@pytest.mark.parametrize("kill_at", ["after_reserve", "after_place", "before_commit"])
def test_sigkill_at_each_entry_step_converges_after_one_reconciliation(kill_at: str) -> None:
    runs = [make_setup(quantity="0.01") for _ in range(3)]  # three kills per step, in parallel
    signals_in = [make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000") for setup in runs]
    children = [_spawn([signal], broker="paper", kill_at=kill_at, lock_ttl_s=0.5) for signal in signals_in]
    for child in children:
        child.communicate(timeout=60)
        assert child.returncode == -signals.SIGKILL

    for setup, signal in zip(runs, signals_in):
        [intent] = OrderIntent.objects.filter(account_id=setup.account.pk)
        at_broker = PaperOrder.objects.filter(client_order_id=intent.client_order_id).count()
        assert at_broker == (0 if kill_at == "after_reserve" else 1)
        assert not Order.objects.filter(account_id=setup.account.pk).exists()  # nothing persisted before the kill
        # The signal's row says in flight, with the order id reconciliation settles it by.
        outcome = SignalOutcome.objects.get(account_id=setup.account.pk)
        assert (outcome.outcome, outcome.client_order_id) == (Outcome.IN_FLIGHT, intent.client_order_id)

        registry = BrokerRegistry()
        broker = registry.broker_for(account_id=setup.account.pk, venue="paper", mode="paper")

        def reconciled() -> bool:
            # The killed process's entry lease expires after its TTL; until then the pass skips the intent.
            asyncio.run(reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts", lock_ttl_s=5.0))
            return OrderIntent.objects.get(pk=intent.pk).state != OrderIntent.State.PENDING

        eventually(reconciled, timeout_s=15, interval_s=0.2)
        intent.refresh_from_db()
        if at_broker:
            order = Order.objects.get(client_order_id=intent.client_order_id)
            assert intent.state == OrderIntent.State.PLACED and order.via_reconciliation
            # A fill at the paper exchange reaches the ledger once, however many passes run.
            paper_match([tick("50000", "1")], fees=PaperFees())
            for _ in range(2):
                asyncio.run(reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts"))
            broker_fills = PaperFill.objects.filter(order__client_order_id=order.client_order_id).count()
            assert Fill.objects.filter(order=order).count() == broker_fills == 1
        else:
            assert intent.state == OrderIntent.State.ABANDONED
            assert CapitalLedger.objects.get(account_id=setup.account.pk).reserved_for_orders == 0

        # The same signal again (a retry after the restart) never becomes a second broker order.
        executor = TradeExecutor(
            broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue="paper", mode="paper"),
            config=ExecutorConfig(),
        )
        assert asyncio.run(executor.handle(signal)) == ["duplicate"]
        assert PaperOrder.objects.filter(client_order_id=intent.client_order_id).count() == at_broker
        report = ledger_check(account_id=setup.account.pk)
        assert report.ok, report.problems


def test_concurrent_entries_never_over_allocate_and_the_journal_adds_up() -> None:
    setup = make_setup(capital="1000", quantity="0.01")
    amount = 70 * SCALE  # 14 of these fit in 1000
    threads = 8
    per_thread = 6
    accepted: list[str] = []
    refused: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def worker(n: int) -> None:
        barrier.wait()
        try:
            for i in range(per_thread):
                cid = f"ts-{setup.account.pk}-c{n}x{i}"
                spec = market_entry_spec(setup, cid, quantity=10**6, price=5 * 10**12, reserve=amount)
                try:
                    intent_create(spec=spec)
                except InsufficientCapital:
                    with lock:
                        refused.append(cid)
                    continue
                with lock:
                    accepted.append(cid)
                if i % 3 == 2:  # some orders are rejected by the broker: their capital comes back
                    intent_abandon(client_order_id=cid, reason="rejected in test")
                    with lock:
                        accepted.remove(cid)
        finally:
            close_old_connections()

    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    ledger = CapitalLedger.objects.get(account_id=setup.account.pk)
    assert ledger.reserved_for_orders == len(accepted) * amount <= ledger.allocated_capital
    # Capital ran out and the rest were refused. Fewer than 14 may stay accepted: an
    # abandon that returns capital after every other thread is done leaves it unused.
    assert len(accepted) <= 14 and refused
    report = ledger_check(account_id=setup.account.pk)
    assert report.ok, report.problems
