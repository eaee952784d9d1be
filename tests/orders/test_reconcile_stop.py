"""A clean stop books what the broker did and resolves every pending intent before the process exits.

In process: the final reconciliation pass registered by the restart rebuild. End to
end: SIGTERM to a `runfeed` process trading on the paper broker, after which (before
any restart) the site's orders, fills, reservations and positions equal the paper book.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from core.runtime.core import Phase, Runtime, RuntimeContext, StartupTask
from dashboard.halts import entries_halt_by_reconciliation
from feeds.market import parse_fixed
from orders.brokers.base import OrderRequest
from orders.brokers.paper import PaperBroker, PaperFees, paper_match
from orders.ledger import ledger_check
from orders.lifecycle import IntentSpec, intent_create, lifecycle_persist
from orders.models import AuditEvent, Fill, OrderIntent, Position
from orders.startup import EntryControls, OrdersHubs, orders_startup_tasks
from tests.helpers import eventually
from tests.helpers_migrated import migrated_var_dir
from tests.orders.factories import make_setup, tick

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def _spec(setup, name: str) -> IntentSpec:  # type: ignore[no-untyped-def]
    return IntentSpec(
        client_order_id=f"ts-{setup.account.pk}-{name:0>16}",
        account_id=setup.account.pk,
        strategy_id=setup.strategy.pk,
        instrument_id=setup.instrument.pk,
        intent="ENTRY",
        position_side="LONG",
        side="BUY",
        order_type="MARKET",
        quantity=parse_fixed("0.01"),
        price=parse_fixed("50000"),
        reserve=parse_fixed("503"),
    )


async def test_the_final_pass_books_the_last_fill_and_resolves_intents_reserved_just_before_the_stop() -> None:
    setup = await database_sync_to_async(make_setup)()
    broker = PaperBroker(account_key=str(setup.account.pk))
    filled, placed, never_sent = _spec(setup, "filled"), _spec(setup, "placed"), _spec(setup, "neversent")

    async def trade_then_stop(ctx: RuntimeContext, runtime: Runtime) -> None:
        while not runtime.started:
            await asyncio.sleep(0.01)
        # An order persisted and matched by the exchange, its fill not booked yet.
        await database_sync_to_async(intent_create)(spec=filled)
        order = await broker.place_order(
            OrderRequest(filled.client_order_id, "BTCUSDT", "BUY", "MARKET", filled.quantity, None)
        )
        await database_sync_to_async(lifecycle_persist)(broker_order=order)
        await database_sync_to_async(paper_match)([tick("50000", "1")], fees=PaperFees())
        # An entry the broker took, stopped before its lifecycle was persisted.
        await database_sync_to_async(intent_create)(spec=placed)
        await broker.place_order(
            OrderRequest(placed.client_order_id, "BTCUSDT", "BUY", "MARKET", placed.quantity, None)
        )
        # An entry reserved whose order never left.
        await database_sync_to_async(intent_create)(spec=never_sent)
        runtime.request_stop()

    async def start(ctx: RuntimeContext) -> None:
        ctx.spawn("trade-then-stop", trade_then_stop(ctx, runtime))

    runtime = Runtime(
        [
            *orders_startup_tasks(OrdersHubs(), controls=EntryControls(entries_halt=entries_halt_by_reconciliation)),
            StartupTask("trade", Phase.DATA_BRIDGE, start),
        ],
        stop_timeout_s=10,
    )
    assert await runtime.run() == 0

    def books_match() -> None:
        assert Fill.objects.get().order.client_order_id == filled.client_order_id
        assert Position.objects.get(state="OPEN").quantity == parse_fixed("0.01")
        states = dict(OrderIntent.objects.values_list("client_order_id", "state"))
        assert states == {
            filled.client_order_id: "PLACED",
            placed.client_order_id: "PLACED",
            never_sent.client_order_id: "ABANDONED",
        }
        assert ledger_check(account_id=setup.account.pk).ok
        report = AuditEvent.objects.get(event="reconcile.stop")
        assert report.details == {"pending_intents": 0, "pending_reserved": "0", "working_orders": 1}

    await database_sync_to_async(books_match)()


# ---- end to end ---------------------------------------------------------------------

FAST_STRATEGY = """
import django; django.setup()
from decimal import Decimal
from feeds.models import Instrument
from orders.models import Account, TradeSetting
from processor.models import Strategy
account = Account.objects.get(name="Paper")
strategy = Strategy.objects.create(
    name="fast-ema", kind="ema", params={"timeframe_s": 1, "fast": 2, "slow": 3, "long_only": False}
)
strategy.instruments.add(*Instrument.objects.filter(venue_symbol__in=["BTC-USD", "ETH-USD"]))
TradeSetting.objects.create(strategy=strategy, account=account, quantity=Decimal("0.01"), mode="paper")
TradeSetting.objects.create(
    strategy=Strategy.objects.create(
        name="fast-ema-limit", kind="ema", params={"timeframe_s": 1, "fast": 2, "slow": 4, "long_only": False}
    ),
    # A whole lot of SOL (lot size 0.1), so limit orders rest at the paper broker: orders working at the stop.
    account=account, quantity=Decimal("0.1"), mode="paper", order_type="LIMIT",
)
Strategy.objects.get(name="fast-ema-limit").instruments.add(Instrument.objects.get(venue_symbol="SOL-USD"))
print(account.pk)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "REDIS_URL")}
    env.update(
        {
            "VAR_DIR": str(tmp_path / "var"),
            "DEMO_PASSWORD": "stop-test-password-42",
            "DJANGO_SETTINGS_MODULE": "tradingsite.settings",
            "RUNTIME_STOP_TIMEOUT_S": "20",
            # Each placement takes this long, so a stop finds entries reserved and not yet answered.
            "ORDERS_PAPER_LATENCY_S": "1.5",
        }
    )
    return env


def _run(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _rows(db: Path, sql: str, *params: object) -> list[tuple]:  # type: ignore[type-arg]
    with sqlite3.connect(db, timeout=30) as connection:
        return connection.execute(sql, params).fetchall()


SITE_STATUS = {
    "NEW": "NEW",
    "SUBMITTED": "NEW",
    "PARTIALLY_FILLED": "PARTIALLY_FILLED",
    "FILLED": "FILLED",
    "CANCELED": "CANCELED",
    "REJECTED": "REJECTED",
    "EXPIRED": "EXPIRED",
}


@pytest.mark.timeout(420)  # three Django starts and a live feed; slow on a shared 2-core machine
@pytest.mark.embedded_site  # its processes run on their own VAR_DIR's SQLite in every pass
def test_after_a_sigterm_while_orders_work_the_site_books_equal_the_paper_brokers(tmp_path: Path) -> None:
    env = _env(tmp_path)
    migrated_var_dir(env["VAR_DIR"])
    _run(env, "manage.py", "loaddemo")
    account = _run(env, "-c", FAST_STRATEGY).strip()
    db = tmp_path / "var" / "db.sqlite3"
    feed = subprocess.Popen(
        [sys.executable, "manage.py", "runfeed", "--feed", "sim"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    in_flight: set[str] = set()
    try:

        def trading() -> bool:
            assert feed.poll() is None, "runfeed exited early"
            filled = _rows(db, "SELECT count(*) FROM orders_fill")[0][0]
            working = _rows(
                db, "SELECT count(*) FROM orders_order WHERE status IN ('NEW', 'SUBMITTED', 'PARTIALLY_FILLED')"
            )[0][0]
            pending = {
                cid for (cid,) in _rows(db, "SELECT client_order_id FROM orders_orderintent WHERE state = 'PENDING'")
            }
            in_flight.clear()
            in_flight.update(pending)
            return filled >= 2 and working >= 1 and bool(pending)

        # The stop goes out the moment entries are seen reserved and waiting for the broker's
        # answer: those are what it must settle. Reading them again later would race the
        # broker's answer, which often lands within milliseconds.
        eventually(trading, timeout_s=120, interval_s=0.1)
        feed.send_signal(signal.SIGTERM)
        output, _ = feed.communicate(timeout=60)
        assert feed.returncode == 0, output
    finally:
        if feed.poll() is None:
            feed.kill()
            feed.wait()

    # Orders: one site order per paper order, same fill state.
    paper_orders = {
        cid: (status, filled)
        for cid, status, filled in _rows(
            db, "SELECT client_order_id, status, filled_quantity FROM orders_paperorder WHERE account_key = ?", account
        )
    }
    site_orders = {
        cid: (SITE_STATUS[status], filled)
        for cid, status, filled in _rows(
            db, "SELECT client_order_id, status, filled_quantity FROM orders_order WHERE account_id = ?", account
        )
    }
    assert site_orders == paper_orders
    # It stopped mid-trade: entries were reserved and waiting for the broker; each one is settled now.
    assert in_flight
    settled = dict(_rows(db, "SELECT client_order_id, state FROM orders_orderintent"))
    assert all(settled[cid] in ("PLACED", "ABANDONED") for cid in in_flight), {cid: settled[cid] for cid in in_flight}
    # Fills: every paper fill booked once, with its quantity and price.
    paper_fills = set(
        _rows(
            db,
            "SELECT 'PT' || f.id, f.quantity, f.price FROM orders_paperfill f "
            "JOIN orders_paperorder o ON o.id = f.order_id WHERE o.account_key = ?",
            account,
        )
    )
    site_fills = set(
        _rows(db, "SELECT exchange_trade_id, quantity, price FROM orders_fill WHERE account_id = ?", account)
    )
    assert site_fills == paper_fills
    # Reservations: no intent left pending, and only orders working at the broker hold capital.
    assert _rows(db, "SELECT count(*) FROM orders_orderintent WHERE state = 'PENDING'")[0][0] == 0, (
        _rows(
            db,
            "SELECT client_order_id, intent, signal_output_id, strategy_id FROM orders_orderintent WHERE state = 'PENDING'",
        ),
        output[-3000:],
    )
    abandoned = {
        cid for (cid,) in _rows(db, "SELECT client_order_id FROM orders_orderintent WHERE state = 'ABANDONED'")
    }
    assert not abandoned & set(paper_orders)
    [(reserved_for_orders,)] = _rows(
        db, "SELECT reserved_for_orders FROM orders_capitalledger WHERE account_id = ?", account
    )
    working_reserved = _rows(
        db,
        "SELECT coalesce(sum(reserved), 0) FROM orders_order WHERE account_id = ? AND status IN "
        "('NEW', 'SUBMITTED', 'PARTIALLY_FILLED')",
        account,
    )[0][0]
    assert reserved_for_orders == working_reserved
    assert (
        _rows(
            db,
            "SELECT coalesce(sum(reserved), 0) FROM orders_order WHERE account_id = ? AND status NOT IN "
            "('NEW', 'SUBMITTED', 'PARTIALLY_FILLED')",
            account,
        )[0][0]
        == 0
    )
    # Positions: the net per symbol equals the paper book's net of fills.
    paper_net = dict(
        _rows(
            db,
            "SELECT o.symbol, sum(CASE o.side WHEN 'BUY' THEN f.quantity ELSE -f.quantity END) "
            "FROM orders_paperfill f JOIN orders_paperorder o ON o.id = f.order_id "
            "WHERE o.account_key = ? GROUP BY o.symbol",
            account,
        )
    )
    site_net = dict(
        _rows(
            db,
            "SELECT i.venue_symbol, sum(CASE p.side WHEN 'LONG' THEN p.quantity ELSE -p.quantity END) "
            "FROM orders_position p JOIN feeds_instrument i ON i.id = p.instrument_id "
            "WHERE p.account_id = ? AND p.state = 'OPEN' GROUP BY i.venue_symbol",
            account,
        )
    )
    assert {s: q for s, q in site_net.items() if q} == {s: q for s, q in paper_net.items() if q}
    [(report,)] = _rows(db, "SELECT message FROM orders_auditevent WHERE event = 'reconcile.stop'")
    assert "0 pending intents" in report
