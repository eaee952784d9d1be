"""Site-wide trading figures come from the database: the same on every process, whoever traded.

Orders, fills, positions and signal outcomes are made through the real trading path
(executor, paper matcher); the figures are read back on /internal/health, on the
health panel and as `site_*` families on /metrics. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import time

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from feeds.market import FeedData
from feeds.models import Tick
from orders.brokers.paper import PaperFees
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.paper_matching import PaperMatcher
from processor.signals import SignalKind
from tests.orders.factories import make_instrument, make_setup, make_signal, make_strategy, tick
from tradingsite import site_figures as site
from tradingsite.site_collector import SITE_FAMILIES, SiteFiguresCollector

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_cache(settings) -> None:  # type: ignore[no-untyped-def]
    settings.SITE_FIGURES_CACHE_S = 0
    site.forget_cached()


def _executor() -> tuple[TradeExecutor, PaperMatcher]:
    matcher = PaperMatcher(fees=PaperFees(taker_bps=4, maker_bps=2), refresh_s=0.0)
    registry = BrokerRegistry(on_paper_place=matcher.order_placed)
    executor = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
    )
    return executor, matcher


def _record_ticks(now_ns: int) -> None:
    btc = make_instrument("sim", "BTCUSDT")
    eth = make_instrument("sim", "ETHUSDT")
    other = make_instrument("bin", "SOLUSDT", venue="binance_usdm")
    make_instrument("quiet", "XRPUSDT")  # a feed that never recorded a tick
    second = 1_000_000_000
    rows = [
        Tick(instrument=btc, ts_event=now_ns - 10 * second, ts_recv=now_ns, price=1, volume=1, trade_id="b1"),
        Tick(instrument=btc, ts_event=now_ns - 5 * second, ts_recv=now_ns, price=1, volume=1, trade_id="b2"),
        Tick(instrument=eth, ts_event=now_ns - 2 * second, ts_recv=now_ns, price=1, volume=1, trade_id="e1"),
        # older than the minute: counts for the last tick time of its feed only
        Tick(instrument=other, ts_event=now_ns - 600 * second, ts_recv=now_ns, price=1, volume=1, trade_id="s1"),
    ]
    Tick.objects.bulk_create(rows)


def _staff_client() -> Client:
    client = Client()
    staff = get_user_model().objects.filter(username="ops").first()
    client.force_login(staff or get_user_model().objects.create_user("ops", password="x", is_staff=True))
    return client


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def test_figures_follow_what_was_traded_and_recorded_on_health_and_metrics() -> None:
    executor, matcher = _executor()
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    # Traded and filled: one order FILLED, one fill, one open LONG position.
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    # Refused: a second entry while the position is open; an exit of a side not held.
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50010")) == ["position_open"]
    # A strategy no account trades: refused with no trade setting.
    lonely = await database_sync_to_async(make_strategy)()
    assert await executor.handle(make_signal(lonely, SignalKind.ENTRY_SHORT, "50000")) == ["no_trade_setting"]
    now_ns = time.time_ns()
    await database_sync_to_async(_record_ticks)(now_ns)

    body = await database_sync_to_async(lambda: _staff_client().get("/internal/health").json())()
    figures = body["siteFigures"]["database"]
    assert body["siteFigures"]["metricPeers"] == []  # none configured: the counts are this process's
    assert figures["source"] == "database"
    assert figures["ordersByStatus"]["FILLED"] == 1 and figures["openOrders"] == 0
    assert figures["fills"] == 1 and figures["fillsViaReconciliation"] == 0
    assert figures["openPositionsBySide"] == {"LONG": 1, "SHORT": 0}
    assert figures["signalsByCategory"] == {"traded": 1, "pending": 0, "refused": 2}
    assert figures["signalsByOutcome"] == {"placed": 1, "position_open": 1, "no_trade_setting": 1}
    feeds = figures["feeds"]
    assert {name: f["ticksLastWindow"] for name, f in feeds.items()} == {"bin": 0, "quiet": 0, "sim": 3}
    assert feeds["sim"]["instruments"] == 2
    assert feeds["sim"]["lastTickNs"] == now_ns - 2_000_000_000
    assert feeds["bin"]["lastTickNs"] == now_ns - 600_000_000_000
    assert feeds["quiet"]["lastTickNs"] is None and feeds["quiet"]["lastTickAgeS"] is None
    assert 1.5 < feeds["sim"]["lastTickAgeS"] < 600

    text = await database_sync_to_async(lambda: _staff_client().get("/metrics").content.decode())()
    samples = _samples(text)
    assert samples[("site_figures_up", ())] == 1
    assert samples[("site_orders", (("status", "FILLED"),))] == 1
    assert samples[("site_orders", (("status", "REJECTED"),))] == 0
    assert samples[("site_fills", ())] == 1
    assert samples[("site_open_positions", (("side", "LONG"),))] == 1
    assert samples[("site_signal_outcomes", (("category", "refused"), ("outcome", "position_open")))] == 1
    assert samples[("site_signal_outcomes", (("category", "traded"), ("outcome", "placed")))] == 1
    assert samples[("site_feed_ticks_last_minute", (("feed", "sim"),))] == 3
    assert samples[("site_feed_last_tick_timestamp_seconds", (("feed", "sim"),))] == pytest.approx(
        (now_ns - 2_000_000_000) / 1e9
    )
    assert ("site_feed_last_tick_timestamp_seconds", (("feed", "quiet"),)) not in samples
    # The process's own families carry its role; the site's carry none (they are the site's).
    assert any(name == "orders_entries_total" and ("role", "web") in labels for name, labels in samples)
    assert all("role" not in dict(labels) for name, labels in samples if name.startswith("site_"))

    panel = await database_sync_to_async(lambda: _staff_client().get("/dashboard/panels/health/").content.decode())()
    assert 'data-figure="fills">1<' in panel and 'data-feed="sim"' in panel


def test_the_figures_cost_a_fixed_number_of_queries_whatever_the_data() -> None:
    def count_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            site.compute_site_figures()
        return len(ctx.captured_queries)

    empty = count_queries()
    for n in range(6):
        make_instrument(f"feed{n}", f"SYM{n}")
    make_setup()
    assert count_queries() == empty == 5  # orders, fills, positions, outcomes, feeds: no query per row


def test_an_empty_site_lists_every_status_at_zero_and_every_family() -> None:
    text = _staff_client().get("/metrics").content.decode()
    exported = {family.name for family in text_string_to_metric_families(text)}
    assert set(SITE_FAMILIES) <= exported
    samples = _samples(text)
    assert samples[("site_orders", (("status", "NEW"),))] == 0
    assert samples[("site_open_positions", (("side", "SHORT"),))] == 0


def test_the_cache_answers_within_its_ttl_and_recomputes_after(settings) -> None:  # type: ignore[no-untyped-def]
    settings.SITE_FIGURES_CACHE_S = 3600
    site.forget_cached()
    first = site.site_figures()
    make_instrument("later", "ADAUSDT")
    assert site.site_figures() is first  # within the TTL: no query
    site.forget_cached()
    assert [f.feed for f in site.site_figures().feeds] == ["later"]


def test_a_database_error_is_site_figures_up_0_never_a_failed_scrape() -> None:
    from django.db import OperationalError

    def broken() -> site.SiteFigures:
        raise OperationalError("connection refused")

    families = list(SiteFiguresCollector(broken).collect())
    assert [(f.name, [s.value for s in f.samples]) for f in families] == [("site_figures_up", [0])]


def test_internal_health_says_null_when_the_figures_cannot_be_read(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from django.db import OperationalError

    def broken() -> object:
        raise OperationalError("too many connections")

    monkeypatch.setattr(site, "site_figures_document", broken)
    response = _staff_client().get("/internal/health")
    assert response.status_code == 200 and response.json()["siteFigures"]["database"] is None
