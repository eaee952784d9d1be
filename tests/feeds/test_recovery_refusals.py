"""A bad trade in a REST gap-recovery page is refused on its own; the rest of the page is recovered.

Against the fake Binance USD-M venue (a real local websocket and REST server) through
the runtime runfeed builds: trades executed while the feed is disconnected, some of
them impossible (a zero price, a number beyond the documented range, a negative
size), come back over REST in the recovery page. Each bad row is counted as refused
with its reason, every good trade is recorded, and a later recovery whose page starts
with the same bad trade walks past it instead of sticking on it.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from channels.db import database_sync_to_async
from prometheus_client import REGISTRY

from core.health import Status
from core.runtime.core import Runtime
from feeds.market import parse_fixed
from feeds.models import Tick
from feeds.startup import FeedHubs, feed_startup_tasks
from feeds.venues.binance_usdm import parse_agg_trade_page
from tests.fakes.binance_usdm import FakeBinanceUsdm, make_tape
from tests.feeds.factories import make_feed
from tests.feeds.stream_harness import fast_runtime_streams
from tests.helpers import async_eventually

SYMBOL = "BTCUSDT"
# Tape positions (0-based) of impossible trades, all executed while the feed is away;
# the last one is the gap's newest trade, so every later recovery fetches it again.
BAD = {150: ("price", "0"), 220: ("number", "1" + "0" * 40), 260: ("size", "-0.015"), 299: ("price", "0")}


def _refused(reason: str) -> float:
    labels = {"venue": "binance-usdm", "reason": reason}
    return REGISTRY.get_sample_value("feed_recovery_rows_refused_total", labels) or 0.0


def _tape() -> list:  # type: ignore[type-arg]
    tape = make_tape(400, (SYMBOL,))
    for index, (reason, value) in BAD.items():
        field = "quantity" if reason == "size" else "price"
        tape[index] = replace(tape[index], **{field: value})
    return tape


@pytest.fixture
def fast_streams(settings):  # type: ignore[no-untyped-def]
    return fast_runtime_streams(settings, heartbeat_timeout_s=2)


@pytest.mark.django_db(transaction=True)
async def test_bad_rows_of_a_recovery_page_are_refused_and_every_good_trade_is_recorded(fast_streams) -> None:  # type: ignore[no-untyped-def]
    reasons = {reason for reason, _ in BAD.values()}
    async with FakeBinanceUsdm(_tape()) as venue:
        await database_sync_to_async(make_feed)(
            "bin", (SYMBOL,), venue="binance-usdm", settings={"ws_url": venue.ws_url, "rest_url": venue.rest_url}
        )
        before = {reason: _refused(reason) for reason in reasons}
        runtime = Runtime(feed_startup_tasks(FeedHubs(), ["bin"]))
        task = asyncio.create_task(runtime.run())
        count = database_sync_to_async(Tick.objects.count)

        async def recorded(n: int) -> bool:
            assert not task.done(), "the runtime stopped"
            return await count() == n

        async def reconnected(n: int) -> bool:
            assert not task.done(), "the runtime stopped"
            return venue.stats.subscribe_messages >= n

        try:
            await async_eventually(lambda: reconnected(1), timeout_s=20, interval_s=0.02)
            venue.release(100)
            await async_eventually(lambda: recorded(100), timeout_s=20, interval_s=0.02)
            # Away while the next 200 trades execute, four of them impossible.
            venue.refuse_connections(True)
            venue.close_connections()
            venue.release(200)
            venue.refuse_connections(False)
            await async_eventually(lambda: recorded(300 - len(BAD)), timeout_s=20, interval_s=0.02)
            assert {reason: _refused(reason) - before[reason] for reason in reasons} == {
                "price": 2,
                "number": 1,
                "size": 1,
            }
            # Away again with nothing new: the recovery page starts with the gap's last,
            # impossible trade (the checkpoint is the good one before it). It is refused
            # again and the feed goes on to record what comes next.
            venue.close_connections()
            await async_eventually(lambda: reconnected(3), timeout_s=20, interval_s=0.02)
            venue.release(100)
            await async_eventually(lambda: recorded(400 - len(BAD)), timeout_s=20, interval_s=0.02)
            health = runtime.context.health.get("feed:bin")
            assert health is not None and health.status is Status.HEALTHY
        finally:
            runtime.request_stop()
            assert await task == 0

    stored = await database_sync_to_async(
        lambda: list(Tick.objects.order_by("pk").values_list("trade_id", "price", "volume", "ts_event"))
    )()
    good = [executed for index, executed in enumerate(venue.executed) if index not in BAD]
    assert stored == [
        (str(e.trade.agg_id), parse_fixed(e.trade.price), parse_fixed(e.trade.quantity), e.ts_ms * 1_000_000)
        for e in good
    ]


def test_a_page_with_a_bad_row_keeps_its_good_rows_and_the_ids_of_all() -> None:
    body = (
        b'[{"a":7,"p":"100.5","q":"0.1","f":1,"l":1,"T":1764460800123,"m":true},'
        b'{"a":8,"p":"-1","q":"0.1","f":2,"l":2,"T":1764460800124,"m":true},'
        b'{"a":"nine","p":"1","q":"0.1","f":3,"l":3,"T":1764460800125,"m":true},'
        b'{"a":10,"p":"101","q":"0.2","f":4,"l":4,"T":1764460800126,"m":false}]'
    )
    page = parse_agg_trade_page(body, SYMBOL, 5)
    assert [t.trade_id for t in page.trades] == ["7", "10"]
    assert [(r.reason, r.trade_id) for r in page.refused] == [("price", 8), ("schema", None)]
    assert (page.rows, page.min_id, page.max_id) == (4, 7, 10)


def test_a_body_that_is_no_page_at_all_is_still_one_parse_error() -> None:
    from feeds.venues.base import ParseError

    with pytest.raises(ParseError):
        parse_agg_trade_page(b'{"code":-1121,"msg":"Invalid symbol."}', SYMBOL, 5)
    with pytest.raises(ParseError):
        parse_agg_trade_page(b"[" * 5000 + b"]" * 5000, SYMBOL, 5)
    deep_row = (
        b'[{"a":7,"p":"1","q":"1","f":1,"l":1,"T":1764460800123,"m":true,"x":' + b"[" * 5000 + b"]" * 5000 + b"}]"
    )
    # Too deep for the decoder to even split the rows: the page fails as one, counted as `depth`.
    with pytest.raises(ParseError, match="depth"):
        parse_agg_trade_page(deep_row, SYMBOL, 5)


# Mutated copies of each venue's recorded REST page: the same classes as the frame fuzzing.
PAGE_FUZZ = {"binance-usdm": "rest_aggTrades.json", "bitflyer": "rest_executions.json"}
PAGES_PER_VENUE = 3_000  # the 100,000-per-venue bulk is the frame fuzzing; this covers the page path


@pytest.mark.parametrize("venue_name", sorted(PAGE_FUZZ))
def test_mutated_recovery_pages_keep_their_good_rows_and_raise_nothing_but_a_parse_error(venue_name: str) -> None:
    import random
    from collections import Counter

    from feeds.venues import get_venue
    from feeds.venues.base import ParseError
    from tests.feeds.venues import golden
    from tests.feeds.venues.invariants import check_event
    from tests.feeds.venues.mutations import MUTATIONS, _json_mutation, _JsonFrame

    venue = get_venue(venue_name)
    source = _JsonFrame((golden.FIXTURES / venue_name / PAGE_FUZZ[venue_name]).read_bytes())
    symbol = "BTCUSDT" if venue_name == "binance-usdm" else "BTC_JPY"
    rng = random.Random(f"pages:{venue_name}:20261201")
    outcomes: Counter[str] = Counter()
    for number in range(PAGES_PER_VENUE):
        kind = MUTATIONS[number % len(MUTATIONS)]
        body = _json_mutation(rng, kind, source)
        try:
            page = venue.parse_trade_page(body, symbol, golden.RECEIVED_NS)  # type: ignore[attr-defined]
        except ParseError:
            outcomes["page refused"] += 1
            continue
        assert page.rows == len(page.trades) + len(page.refused), (number, kind, body[:300])
        for trade in page.trades:
            check_event(trade)
        outcomes["rows refused" if page.refused else "page whole"] += 1
    assert outcomes["rows refused"] > 0 and outcomes["page whole"] > 0, outcomes
