"""Live/backtest parity: the demo strategies over one recorded tape trade the same in both.

The live side is the whole site path in its own process: `runfeed` on the demo's
simulated venue runs the demo strategies (shortened parameters, so a minute of tape
holds several round trips), their signals go through the executor to the paper broker,
the paper exchange fills them on the live ticks and the ledger books them; the recorder
writes every tick. Then the ticks it recorded are backtested, once from the database
(`manage.py backtest --from/--to --feed --symbol`) and once as the CSV `exportticks`
writes (`--ticks`), with the same trade settings (quantity, capital, lot and tick size,
fees, reversal, market orders, no latency on either side). The closed trades must be
equal field for field: side, quantity, entry and exit price, fees, P&L and exit reason.

The live paper exchange fills an order from the first tick it receives after the order
is booked; the backtest, from the first tick after the one that caused the signal (at
zero latency), and a reversal's entry from the tick after its exit's fill. The venue's
tick interval is set well above the site's signal-to-order time, so both name the same
tick: a few seconds, because on a loaded machine the longest chain (an exit's fill
booked, the reversal's entry placed, then cancelled by the next exit, then the next
entry placed, each step in turn on the account) was measured above one second. A machine
so loaded that an order is booked after the next tick has arrived fills it a tick
later live: that is latency, and the comparison then fails showing the trade.

The live strategy's tape starts at one of the first recorded ticks (see TAPE_START); the
test finds it from the signals the site recorded, then compares the trades.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import eventually
from tests.helpers_migrated import migrated_var_dir

ROOT = Path(__file__).resolve().parents[2]
INTERVAL_MS = 2500
ROUND_TRIPS = 3  # per strategy, closed live before the feed is stopped
# The live strategy starts on the tape's first ticks: its route is added (and backfilled from
# what the recorder has written) while the feed already runs, so a tick in flight then is
# seen by neither. The tape it traded starts at one of the first few recorded ticks.
START_CANDIDATES = 12

# The demo strategies with parameters that trade within seconds; exit levels off (see LIVE_TRADES).
SETUP = f"""
import django; django.setup()
from feeds.models import Feed, Instrument
from orders.models import TradeSetting
from processor.models import Strategy
feed = Feed.objects.get(name="sim")
feed.settings = dict(feed.settings, interval_ms={INTERVAL_MS})
feed.save(update_fields=["settings"])
ema = Strategy.objects.get(name="ema-cross")
ema.params = {{"timeframe_s": 1, "fast": 2, "slow": 4, "long_only": False, "bucket_close_only": True}}
ema.save(update_fields=["params"])
ema.instruments.set([Instrument.objects.get(feed=feed, symbol="BTC-USD")])
breakout = Strategy.objects.get(name="sol-volume-breakout")
breakout.params = {{"bar_volume": "8", "lookback": 3, "hold_bars": 2, "cooldown_bars": 1}}
breakout.save(update_fields=["params"])
TradeSetting.objects.update(stop_loss_pct=None, take_profit_pct=None, trailing_stop_pct=None)
"""

# What the site booked, per strategy: closed trades in exit order, and what is still open.
LIVE_TRADES = """
import django, json; django.setup()
from django.conf import settings
from orders.models import Position, TradeSetting
from processor.models import Strategy
from feeds.models import Tick
from orders.models import Fill, Order, SignalOutcome
def working_end(strategy, instrument):
    # With an order still working when the paper exchange stopped matching: the tick of its
    # signal, or of the strategy's last fill when later (exchange times); None otherwise.
    working = Order.objects.filter(strategy=strategy, status__in=["NEW", "PARTIALLY_FILLED"])
    if not working.exists():
        return None
    ends = list(SignalOutcome.objects.filter(
        client_order_id__in=working.values("client_order_id")).values_list("occurrence_ns", flat=True))
    last_fill = Fill.objects.filter(order__strategy=strategy).order_by("-ts_event").first()
    if last_fill is not None:  # a paper fill is stamped with its tick's receive time
        ends.append(Tick.objects.get(instrument=instrument, ts_recv=last_fill.ts_event).ts_event)
    return max(ends)
out = {"taker_bps": settings.ORDERS_PAPER_TAKER_FEE_BPS, "maker_bps": settings.ORDERS_PAPER_MAKER_FEE_BPS}
for strategy in Strategy.objects.filter(name__in=["ema-cross", "sol-volume-breakout"]):
    ts = TradeSetting.objects.select_related("account").get(strategy=strategy)
    instrument = strategy.instruments.get()
    rows = Position.objects.filter(strategy=strategy).order_by("exit_at", "id")
    out[strategy.name] = {
        "kind": strategy.kind, "params": strategy.params, "symbol": instrument.symbol,
        "quantity": str(ts.quantity), "capital": str(ts.account.allocated_capital),
        "lot_size": str(instrument.lot_size), "tick_size": str(instrument.tick_size),
        "order_type": ts.order_type, "reversal": ts.reversal,
        "closed": [
            [p.side, p.entry_quantity, p.entry_notional, p.exit_quantity, p.exit_notional, p.fees,
             p.realized_pnl, p.exit_reason]
            for p in rows.filter(state="CLOSED", entry_quantity__gt=0)
        ],
        # A position row whose entry never filled (cancelled at the stop) traded nothing.
        "unfilled": rows.filter(state="CLOSED", entry_quantity=0).count(),
        "open": [[p.side, p.quantity, p.entry_notional] for p in rows.filter(state="OPEN") if p.quantity],
        "working": working_end(strategy, instrument),
    }
print(json.dumps(out))
"""

# Orders working or about to be (0: nothing in flight), read straight from the database file.
QUIET = (
    "SELECT (SELECT count(*) FROM orders_order WHERE status IN ('NEW', 'PARTIALLY_FILLED'))"
    " + (SELECT count(*) FROM orders_orderintent WHERE state = 'PENDING')"
)

# Where the live strategy's tape starts: the first recorded tick from which a replay gives
# exactly the signals the site recorded (kind, tick time, price). None when no start does.
TAPE_START = """
import django, io, json, sys; django.setup()
from datetime import UTC, datetime
from django.core.management import call_command
from feeds.models import Tick
from processor.models import StrategySignal, Strategy
name, symbol, candidates = sys.argv[1], sys.argv[2], int(sys.argv[3])
strategy = Strategy.objects.get(name=name)
live = [
    [s.kind, s.occurrence_ns // 1_000_000, s.price_fixed]
    for s in StrategySignal.objects.filter(strategy=strategy).order_by("occurrence_ns", "id")
]
ticks = Tick.objects.filter(instrument__feed__name="sim", instrument__symbol=symbol).order_by("ts_event")
times = list(ticks.values_list("ts_event", flat=True))
from feeds.market import parse_fixed
def iso(ns):
    return datetime.fromtimestamp(ns // 10**9, tz=UTC).replace(microsecond=ns % 10**9 // 1000).isoformat()
found = None
for start in times[:candidates]:
    out = io.StringIO()
    call_command(
        "backtest", strategy=strategy.kind, params=json.dumps(strategy.params), start=iso(start),
        end=iso(times[-1] + 1_000), feed="sim", symbol=symbol, signals_only=True, stdout=out,
        stderr=io.StringIO(),
    )
    replayed = [json.loads(line) for line in out.getvalue().splitlines()]
    replayed = [[s["kind"], s["occurrence_time_ms"], parse_fixed(s["price"])] for s in replayed]
    if replayed == live:
        found = start
        break
print(json.dumps({"start": found, "last": times[-1], "signals": len(live)}))
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(
        {
            "VAR_DIR": str(tmp_path / "var"),
            "DJANGO_SETTINGS_MODULE": "tradingsite.settings",
            "DEMO_PASSWORD": "parity-test-password-42",
            "ORDERS_PAPER_LATENCY_S": "0",
        }
    )
    return env


def _run(env: dict[str, str], *args: str) -> str:
    result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _live(env: dict[str, str]) -> dict[str, Any]:
    return json.loads(_run(env, "-c", LIVE_TRADES).strip().splitlines()[-1])


def _fixed(text: str) -> int:
    from feeds.market import parse_fixed

    return parse_fixed(text)


def _price(notional: int, quantity: int) -> int:
    from core.fixed_point import SCALE

    return notional * SCALE // quantity


def _live_closed(rows: list[list[Any]]) -> list[tuple[Any, ...]]:
    # The site's figures, in the backtest report's terms (the contract multiplier of the demo is 1).
    return [
        (side.lower(), eq, _price(en, eq), _price(xn, xq), fees, pnl, reason)
        for side, eq, en, xq, xn, fees, pnl, reason in rows
    ]


def _backtest_closed(trades: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            t["side"],
            _fixed(t["quantity"]),
            _fixed(t["entry_price"]),
            _fixed(t["exit_price"]),
            _fixed(t["fees"]),
            _fixed(t["pnl"]),
            t["exit_reason"],
        )
        for t in trades
    ]


def _backtest(env: dict[str, str], setup: dict[str, Any], fees: dict[str, int], source: list[str]) -> dict[str, Any]:
    args = [
        "manage.py",
        "backtest",
        "--strategy",
        setup["kind"],
        "--params",
        json.dumps(setup["params"]),
        *source,
        "--report",
        "json",
        "--capital",
        setup["capital"],
        "--quantity",
        setup["quantity"],
        "--lot-size",
        setup["lot_size"],
        "--tick-size",
        setup["tick_size"],
        "--order-type",
        setup["order_type"],
        "--reversal",
        setup["reversal"],
        "--taker-bps",
        str(fees["taker_bps"]),
        "--maker-bps",
        str(fees["maker_bps"]),
        "--latency-ms",
        "0",
    ]
    return json.loads(_run(env, *args))


def _iso(ns: int) -> str:
    from datetime import UTC, datetime

    seconds, nanos = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=nanos // 1000).isoformat()


def _assert_parity(live: dict[str, Any], report: dict[str, Any], source: str) -> None:
    from backtesting.simulated_account import END_OF_BACKTEST

    trades = report["closed_trades"]
    ran = [t for t in trades if t["exit_reason"] != END_OF_BACKTEST]
    ended = [t for t in trades if t["exit_reason"] == END_OF_BACKTEST]
    assert _backtest_closed(ran) == _live_closed(live["closed"]), source
    # What the site still holds at the stop is what the backtest closes at the tape's end.
    assert [(t["side"], _fixed(t["quantity"]), _fixed(t["entry_price"])) for t in ended] == [
        (side.lower(), quantity, _price(notional, quantity)) for side, quantity, notional in live["open"]
    ], source


@pytest.mark.timeout(900)  # several Django starts and a live feed on a shared 2-core machine
@pytest.mark.embedded_site  # its processes run on their own VAR_DIR's SQLite in every pass
def test_the_demo_strategies_trade_the_same_live_and_in_the_backtest(tmp_path: Path) -> None:
    env = _env(tmp_path)
    migrated_var_dir(env["VAR_DIR"])
    _run(env, "manage.py", "loaddemo")
    _run(env, "-c", SETUP)
    feed = subprocess.Popen(
        [sys.executable, "manage.py", "runfeed", "--feed", "sim"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def traded() -> bool:
            assert feed.poll() is None, "runfeed exited early"
            live = _live(env)
            return all(len(live[name]["closed"]) >= ROUND_TRIPS for name in ("ema-cross", "sol-volume-breakout"))

        def quiet() -> bool:
            # Stopped between ticks with nothing working, the tape's end is where trading ended.
            assert feed.poll() is None, "runfeed exited early"
            with sqlite3.connect(tmp_path / "var" / "db.sqlite3", timeout=30) as connection:
                return int(connection.execute(QUIET).fetchone()[0]) == 0

        eventually(traded, timeout_s=420, interval_s=3.0)
        eventually(quiet, timeout_s=120, interval_s=0.2)
        feed.send_signal(signal.SIGTERM)
        output, _ = feed.communicate(timeout=90)
        assert feed.returncode == 0, output
    finally:
        if feed.poll() is None:
            feed.kill()
            feed.wait()

    live = _live(env)
    fees = {"taker_bps": live["taker_bps"], "maker_bps": live["maker_bps"]}
    for name in ("ema-cross", "sol-volume-breakout"):
        setup = live[name]
        found = _run(env, "-c", TAPE_START, name, setup["symbol"], str(START_CANDIDATES))
        tape_span = json.loads(found.strip().splitlines()[-1])
        assert tape_span["start"] is not None, f"{name}: no start of the tape replays the live signals: {tape_span}"
        # The tape ends where the live paper exchange stopped matching this strategy's
        # orders: the stop ends matching before the feed, so the recorder may hold ticks
        # after it, which would fill an order the site left working.
        end = setup["working"] if setup["working"] is not None else tape_span["last"]
        window = ["--from", _iso(tape_span["start"]), "--to", _iso(end + 1_000)]
        recorded = _backtest(env, setup, fees, [*window, "--feed", "sim", "--symbol", setup["symbol"]])
        _assert_parity(setup, recorded, f"{name}: recorded ticks")
        tape = tmp_path / f"{setup['symbol']}.csv"
        export = ["exportticks", "--symbol", setup["symbol"], "--feed", "sim", *window, "--output", str(tape)]
        _run(env, "manage.py", *export)
        from_csv = _backtest(env, setup, fees, ["--ticks", str(tape)])
        _assert_parity(setup, from_csv, f"{name}: CSV tape")
