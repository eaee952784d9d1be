"""The chart history endpoint: candles aggregated by the database, the caller's fills and lines only, bad input a 400."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feeds.models import Feed, Instrument, Subscription
from processor.models import StrategyOutputRecord
from tests.feeds.test_tick_bars import BASE, MINUTE, S, add_ticks
from tests.orders.factories import Setup, logged_in, make_instrument, make_setup, trade_on_paper

END_MS = (BASE + 3 * MINUTE) // 1_000_000  # just after the fixture's last minute


@pytest.fixture
def charted() -> Instrument:
    instrument = make_instrument()
    Subscription.objects.get_or_create(instrument=instrument, channel="trades")
    add_ticks(
        instrument,
        [
            (S // 2, "100.00", "1", "1"),
            (10 * S, "101.50", "2", "2"),
            (30 * S, "99.25", "0.5", "3"),
            (MINUTE - 1, "100.75", "1.5", "4"),
            (2 * MINUTE, "102.00", "0.1", "5"),
            (2 * MINUTE + 10 * S, "103.00", "0.4", "6"),
        ],
    )
    return instrument


@pytest.fixture
def alice(charted: Instrument) -> Setup:
    return make_setup(username="alice", instrument=charted)


def history(client: Client, instrument: Instrument, **params: Any) -> Any:
    response = client.get(f"/dashboard/charts/{instrument.pk}/history/", params)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
def test_minute_candles_are_the_hand_computed_ones(alice: Setup, charted: Instrument) -> None:
    body = history(logged_in(alice), charted, timeframe="1m", end=END_MS)
    assert body["timeframe_s"] == 60
    assert body["bars"] == [
        {
            "time": BASE // S,
            "open": "100",
            "high": "101.5",
            "low": "99.25",
            "close": "100.75",
            "volume": "5",
            "trades": 4,
        },
        {
            "time": (BASE + 2 * MINUTE) // S,
            "open": "102",
            "high": "103",
            "low": "102",
            "close": "103",
            "volume": "0.5",
            "trades": 2,
        },
    ]


@pytest.mark.django_db
def test_another_timeframe_buckets_the_same_ticks_differently(alice: Setup, charted: Instrument) -> None:
    client = logged_in(alice)
    seconds = history(client, charted, timeframe="5s", end=END_MS)["bars"]
    hour = history(client, charted, timeframe="1h", end=END_MS)["bars"]
    assert [bar["time"] - BASE // S for bar in seconds] == [0, 10, 30, 55, 120, 130]
    assert hour == [
        {"time": BASE // S, "open": "100", "high": "103", "low": "99.25", "close": "103", "volume": "5.5", "trades": 6}
    ]


@pytest.mark.django_db
def test_bars_counts_back_from_the_bucket_holding_end(alice: Setup, charted: Instrument) -> None:
    body = history(logged_in(alice), charted, timeframe="1m", bars=2, end=END_MS)
    # The bucket of `end` (minute 3) and minute 2: minute 0 is out of range.
    assert [bar["time"] for bar in body["bars"]] == [(BASE + 2 * MINUTE) // S]
    assert body["start_ms"] == (BASE + 2 * MINUTE) // 1_000_000


@pytest.mark.django_db
def test_indicator_lines_are_the_callers_strategies_only(alice: Setup, charted: Instrument) -> None:
    bob = make_setup(username="bob", instrument=charted)
    for setup, fast in ((alice, 1.5), (bob, 9.5)):
        StrategyOutputRecord.objects.create(
            output_id=f"out-{setup.strategy.name}",
            strategy=setup.strategy,
            strategy_name=setup.strategy.name,
            feed=charted.feed.name,
            symbol=charted.venue_symbol,
            time_ns=BASE,
            occurrence_ns=BASE + 20 * S,
            values={"fast": fast, "slow": 2.0, "close": "100.75"},
        )
    outputs = history(logged_in(alice), charted, end=END_MS)["outputs"]
    assert outputs == [
        {
            "strategy_id": alice.strategy.pk,
            "strategy": alice.strategy.name,
            "occurrence_time_ms": (BASE + 20 * S) // 1_000_000,
            "values": {"fast": 1.5, "slow": 2.0},
        }
    ]


@pytest.mark.django_db(transaction=True)
def test_fills_are_the_callers_own() -> None:
    instrument = make_instrument()
    Subscription.objects.get_or_create(instrument=instrument, channel="trades")
    alice = make_setup(username="alice", instrument=instrument)
    bob = make_setup(username="bob", instrument=instrument)
    trade_on_paper([alice, bob])
    end = time.time_ns() // 1_000_000 + 60_000  # the paper fills happen at a tick one second ahead
    mine = history(logged_in(alice), instrument, timeframe="1h", end=end)["fills"]
    theirs = history(logged_in(bob), instrument, timeframe="1h", end=end)["fills"]
    assert len(mine) == len(theirs) == 1
    assert mine[0]["client_order_id"] != theirs[0]["client_order_id"]
    assert (mine[0]["side"], mine[0]["intent"], mine[0]["quantity"], mine[0]["account"]) == (
        "BUY",
        "ENTRY",
        "0.01",
        "main",
    )
    assert str(alice.account.pk) in mine[0]["client_order_id"]


@pytest.mark.django_db
def test_the_endpoint_needs_a_login(charted: Instrument) -> None:
    response = Client().get(f"/dashboard/charts/{charted.pk}/history/")
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.django_db
def test_an_instrument_without_a_chart_is_a_404(alice: Setup, charted: Instrument) -> None:
    client = logged_in(alice)
    assert client.get("/dashboard/charts/987654/history/").status_code == 404
    Feed.objects.filter(pk=charted.feed_id).update(enabled=False)
    assert client.get(f"/dashboard/charts/{charted.pk}/history/").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("timeframe=2m", "timeframe"),
        ("timeframe=1M", "timeframe"),
        ("bars=0", "bars"),
        ("bars=1001", "bars"),
        ("bars=-5", "bars"),
        ("bars=abc", "bars"),
        ("bars=1e3", "bars"),
        ("bars=%D9%A1%D9%A2", "bars"),  # Arabic-Indic digits: isdigit() says yes, the range says no
        ("end=0", "end"),
        ("end=-1", "end"),
        ("end=99999999999999999999999", "end"),
        ("end=4102444800001", "end"),
        ("end=12%0034", "end"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(alice: Setup, charted: Instrument, query: str, field: str) -> None:
    response = logged_in(alice).get(f"/dashboard/charts/{charted.pk}/history/?{query}")
    assert response.status_code == 400
    assert list(response.json()) == [field]


@pytest.mark.django_db
@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    params=st.dictionaries(
        st.sampled_from(["timeframe", "bars", "end", "x"]),
        st.one_of(
            st.text(max_size=30),
            st.integers(min_value=-(10**30), max_value=10**30).map(str),
            st.sampled_from(["1s", "5s", "1m", "5m", "15m", "1h", "1000", "1", str(END_MS)]),
        ),
    )
)
def test_no_query_string_answers_500(alice: Setup, charted: Instrument, params: dict[str, str]) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(alice.account.owner)
    response = client.get(f"/dashboard/charts/{charted.pk}/history/", params)
    assert response.status_code in (200, 400), (params, response.status_code)
