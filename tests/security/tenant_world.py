"""A site with two tenants and every kind of row, for the access and bad-input walks.

- `owner`: staff (not superuser) with every model permission, owning an account with real
  orders, fills and positions, a trade setting, a broker token with its open prompt, a
  kill switch, control audit rows and an API key;
- `other`: an ordinary user with an account of their own;
- `staff`: staff (not superuser) with every model permission, owning nothing: what a
  permission does not stop, the owner scoping must;
- `root`: a superuser.

Staff hold every permission on purpose: the walk checks what scoping refuses, not what
a missing permission hides.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from alerts.models import Alert, AlertKind
from alerts.services import channel_create
from core.models import ComponentHealth
from feeds.market import parse_fixed
from feeds.models import KnownHole, StreamCheckpoint, Subscription, Tick
from orders.models import AuditEvent, CapitalLedger, Fill, LedgerEntry, Order, Position, SignalOutcome
from processor.models import StrategyOutputRecord, StrategySignal
from recovery.models import AuthPrompt, BrokerToken
from tests.orders.factories import Setup, make_instrument, make_setup, trade_on_paper
from tests.orders.trade_history import RoundTrip, book_round_trip

ROLES = ("anonymous", "other", "staff", "owner")


@dataclass
class World:
    owner: Setup
    other: Setup
    users: dict[str, User]
    ids: dict[str, Any] = field(default_factory=dict)

    def client(self, role: str, **kwargs: Any) -> Client:
        client = Client(**kwargs)
        if role != "anonymous":
            client.force_login(self.users[role])
        return client


def _staff(user: User) -> User:
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.user_permissions.set(Permission.objects.all())
    return User.objects.get(pk=user.pk)  # drop the permission cache


def build_world() -> World:
    from dashboard.models import ControlAction, ControlAudit, KillSwitch

    instrument = make_instrument()
    owner = make_setup(username="owner", instrument=instrument)
    other = make_setup(username="other", instrument=instrument)
    trade_on_paper([owner, other])
    closed_trade = book_round_trip(
        owner.account,
        owner.strategy,
        make_instrument(symbol="ETHUSDT"),
        RoundTrip(
            "LONG",
            "1",
            "100",
            "110",
            "0.1",
            "0.1",
            datetime(2026, 11, 2, 10, tzinfo=UTC),
            datetime(2026, 11, 2, 11, tzinfo=UTC),
        ),
    )
    users = {
        "owner": _staff(owner.account.owner),
        "other": other.account.owner,
        "staff": _staff(User.objects.create_user("staff", password="pw-long-enough-123")),
        "root": User.objects.create_superuser("root", password="pw-long-enough-123"),
    }
    world = World(owner=owner, other=other, users=users)
    feed = instrument.feed
    subscription = Subscription.objects.create(instrument=instrument, channel="trades")
    tick_row = Tick.objects.create(
        instrument=instrument, ts_event=1, ts_recv=2, price=parse_fixed("1"), volume=parse_fixed("1"), trade_id="t1"
    )
    checkpoint = StreamCheckpoint.objects.create(
        feed=feed, venue_symbol="BTCUSDT", trade_id="t1", ts_event=1, price=parse_fixed("1"), volume=parse_fixed("1")
    )
    hole = KnownHole.objects.create(feed=feed, venue_symbol="BTCUSDT", start_ns=1, end_ns=2, reason="test")
    signal = StrategySignal.objects.create(
        strategy=owner.strategy,
        strategy_name=owner.strategy.name,
        feed="sim",
        symbol="BTCUSDT",
        kind="ENTRY_LONG",
        price_fixed=parse_fixed("50000"),
        emitted_at="2026-11-30T00:00:00Z",
        occurrence_ns=1,
        output_id="owner-out",
    )
    output = StrategyOutputRecord.objects.create(
        output_id="owner-out",
        strategy=owner.strategy,
        strategy_name=owner.strategy.name,
        feed="sim",
        symbol="BTCUSDT",
        time_ns=1,
        occurrence_ns=1,
        values={"close": "1"},
    )
    token = BrokerToken.objects.create(broker="upstox", kind="oauth", owner=users["owner"], reason="no token yet")
    prompt = AuthPrompt.objects.create(
        recovery_key="https://broker.example/login?owner",
        broker="upstox",
        kind="oauth",
        owner=users["owner"],
        message="log in, owner",
    )
    switch = KillSwitch.objects.create(scope=f"account:{owner.account.pk}", account=owner.account)
    global_switch = KillSwitch.objects.create(scope="global")
    audit = ControlAudit.objects.create(
        actor=users["owner"],
        actor_name="owner",
        action=ControlAction.KILL_SWITCH_ENGAGE,
        target="account main",
        account=owner.account,
    )
    health = ComponentHealth.objects.create(
        component="feed:sim/trades", process="p1", status="HEALTHY", stale_after_s=60, updated_at=datetime.now(UTC)
    )
    api_key = Token.objects.create(user=users["owner"])
    channel = channel_create(
        owner_id=users["owner"].pk,
        name="owner-hook",
        url="json://127.0.0.1:9/hook/owner-webhook-secret",
        notify_fills=True,
    )
    alert = Alert.objects.create(
        owner=users["owner"],
        channel=channel,
        kind=AlertKind.FILL,
        source="fill:owner",
        title="owner-alert-title",
        body="owner fill",
        next_attempt_at=datetime.now(UTC),
    )
    group = Group.objects.create(name="traders")
    account = owner.account
    site_rows = _site_wide_rows()
    backtest_run = _backtest_run(users["owner"], instrument)
    backtest_sweep = _backtest_sweep(users["owner"], instrument)
    world.ids = {
        **site_rows,
        "orderbook_instrument": _order_book_instrument(),
        "account": account.pk,
        "tradesetting": owner.setting.pk,
        "order": Order.objects.filter(account=account).order_by("pk").values_list("pk", flat=True).first(),
        "fill": Fill.objects.filter(account=account).order_by("pk").values_list("pk", flat=True).first(),
        # The open position traded on paper (the closed trade is "trade").
        "position": Position.objects.filter(account=account, state="OPEN")
        .order_by("pk")
        .values_list("pk", flat=True)
        .first(),
        "trade": closed_trade.pk,
        "capitalledger": CapitalLedger.objects.get(account=account).pk,
        "ledgerentry": LedgerEntry.objects.filter(account=account).order_by("pk").values_list("pk", flat=True).first(),
        "auditevent": AuditEvent.objects.filter(account=account).order_by("pk").values_list("pk", flat=True).first(),
        "signaloutcome": SignalOutcome.objects.filter(account=account).values_list("pk", flat=True).first(),
        "strategy": owner.strategy.pk,
        "strategysignal": signal.pk,
        "strategyoutputrecord": output.pk,
        "feed": feed.pk,
        "instrument": instrument.pk,
        "subscription": subscription.pk,
        "tick": tick_row.pk,
        "streamcheckpoint": checkpoint.pk,
        "knownhole": hole.pk,
        "brokertoken": token.pk,
        "authprompt": prompt.pk,
        "recovery_token": str(prompt.recovery_token),
        "killswitch": switch.pk,
        "global_killswitch": global_switch.pk,
        "controlaudit": audit.pk,
        "backtestrun": backtest_run.pk,
        "backtestsweep": backtest_sweep.pk,
        "componenthealth": health.pk,
        "component": health.component,
        "tokenproxy": users["owner"].pk,  # the token admin is keyed by its user
        "user": users["owner"].pk,
        "group": group.pk,
        "api_key": api_key.key,
        "notificationchannel": channel.pk,
        "alert": alert.pk,
        "alert_title": alert.title,
        "channel_secret": "owner-webhook-secret",
        "client_order_id": Order.objects.filter(account=account).values_list("client_order_id", flat=True).first(),
        "chart_end_ms": time.time_ns() // 1_000_000 + 3_600_000,  # after the paper fills (a tick ahead of now)
    }
    missing = [name for name, value in world.ids.items() if value is None]
    assert not missing, f"the world lacks rows for {missing}"
    return world


def _order_book_instrument() -> int:
    """An instrument streaming its order book (the depth view and its API route)."""
    from decimal import Decimal

    from feeds.models import Feed, Instrument, MarketType

    feed = Feed.objects.create(name="tab", venue="tabdeal", market_type=MarketType.PERPETUAL)
    instrument = Instrument.objects.create(
        feed=feed, symbol="BTC_USDT", venue_symbol="BTC_USDT", tick_size=Decimal("0.1"), lot_size=Decimal("0.001")
    )
    Subscription.objects.create(instrument=instrument, channel="order_book")
    return instrument.pk


def _backtest_run(owner: User, instrument: Any) -> Any:
    """A finished backtest run of the owner, with a report of one closed trade."""
    from backtesting.models import BacktestRun, RunStatus
    from processor.backtest_report import ClosedTrade, build_report, report_as_json

    trade = ClosedTrade(
        instrument=instrument.venue_symbol,
        side="long",
        quantity=parse_fixed("1"),
        entry_time_ns=1_000_000_000,
        entry_price=parse_fixed("100"),
        exit_time_ns=2_000_000_000,
        exit_price=parse_fixed("101"),
        fees=parse_fixed("0.1"),
        pnl=parse_fixed("0.9"),
        exit_reason="signal",
    )
    report = build_report([trade], starting_capital=parse_fixed("1000"), start_ns=0, end_ns=3_000_000_000)
    return BacktestRun.objects.create(
        owner=owner,
        kind="ema",
        params={},
        feed=instrument.feed.name,
        symbols=[instrument.symbol],
        start_ns=0,
        end_ns=3_000_000_000,
        capital="1000",
        quantity="1",
        lot_size="0.001",
        tick_size="0.01",
        taker_bps=5,
        maker_bps=2,
        status=RunStatus.DONE,
        ticks_total=1,
        ticks_done=1,
        report=report_as_json(report),
    )


def _backtest_sweep(owner: User, instrument: Any) -> Any:
    """A finished sweep of the owner over two points."""
    from backtesting.models import BacktestSweep, RunStatus

    return BacktestSweep.objects.create(
        owner=owner,
        kind="ema",
        grid={"fast": [2, 3]},
        feed=instrument.feed.name,
        symbols=[instrument.symbol],
        start_ns=0,
        end_ns=3_000_000_000,
        capital="1000",
        quantity="1",
        lot_size="0.001",
        tick_size="0.01",
        taker_bps=5,
        maker_bps=2,
        status=RunStatus.DONE,
        points_done=2,
        points_total=2,
        results=[],
    )


def _site_wide_rows() -> dict[str, int]:
    """One row of each installed app's site-wide model (login throttling, beat's schedule)."""
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    seen = {"user_agent": "ua", "ip_address": "127.0.0.1", "username": "owner", "http_accept": "*/*", "path_info": "/"}
    interval = IntervalSchedule.objects.create(every=60, period=IntervalSchedule.SECONDS)
    return {
        "accessattempt": AccessAttempt.objects.create(**seen, get_data="", post_data="", failures_since_start=1).pk,
        "accesslog": AccessLog.objects.create(**seen).pk,
        "accessfailurelog": AccessFailureLog.objects.create(**seen).pk,
        "periodictask": PeriodicTask.objects.create(
            name="walk-job", task="tradingsite.tasks.prune_component_health", interval=interval
        ).pk,
        "intervalschedule": interval.pk,
        "clockedschedule": ClockedSchedule.objects.create(clocked_time=datetime.now(UTC)).pk,
        "crontabschedule": CrontabSchedule.objects.create(minute="5").pk,
        "solarschedule": SolarSchedule.objects.create(event="sunrise", latitude=1, longitude=1).pk,
    }


@pytest.fixture(scope="module", name="world")
def world_fixture(django_db_setup: None, django_db_blocker: Any) -> Iterator[World]:
    """One committed world per test module (building it trades on the paper exchange).

    Each test still runs in its own rolled-back transaction on top of it; the world is
    flushed at the end of the module, as a transactional test's data would be.
    """
    with django_db_blocker.unblock():
        from orders.models import Account

        built = build_world()
        built.ids["account_content_type"] = ContentType.objects.get_for_model(Account).pk
        yield built
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture(name="live_db")
def live_db_fixture(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    """The world for tests that reach the async views (mark them django_db as usual).

    Those views reach the database through database_sync_to_async, which closes a
    connection it finds inside a transaction it did not open; on PostgreSQL that ends the
    test's wrapping transaction and the next query fails. Within a test the connection is
    the test's own, so keeping it open changes nothing the views do.
    """
    import channels.db

    monkeypatch.setattr(channels.db, "close_old_connections", lambda: None)
    return world
