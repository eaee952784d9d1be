"""`manage.py feed add|list|enable|disable` and `manage.py exportticks`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from feeds.market import Side, parse_fixed
from feeds.models import Feed, Instrument, MarketType, Subscription, Tick
from feeds.recording.tick_history import recorded_ticks
from feeds.recording.tick_selectors import InstrumentNotFound
from tests.feeds.factories import make_feed

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_feed_add_creates_the_feed_instruments_and_trade_subscriptions_with_url_overrides() -> None:
    out = _run(
        "feed",
        "add",
        "binance-main",
        "--venue",
        "binance-usdm",
        "--symbols",
        "BTCUSDT,ETHUSDT",
        "--ws-url",
        "ws://127.0.0.1:9001",
        "--rest-url",
        "http://127.0.0.1:9001/",
    )
    assert "binance-main: added" in out
    feed = Feed.objects.get(name="binance-main")
    assert feed.venue == "binance-usdm" and feed.enabled and feed.market_type == MarketType.PERPETUAL
    assert feed.settings["ws_url"] == "ws://127.0.0.1:9001" and feed.settings["rest_url"] == "http://127.0.0.1:9001"
    assert sorted(Instrument.objects.filter(feed=feed).values_list("venue_symbol", flat=True)) == ["BTCUSDT", "ETHUSDT"]
    assert Subscription.objects.filter(instrument__feed=feed, channel="trades", enabled=True).count() == 2


@pytest.mark.parametrize(
    "args,message",
    [
        (("--venue", "nope", "--symbols", "A"), "unknown venue"),
        (("--venue", "binance-usdm", "--symbols", " , "), "at least one symbol"),
        (("--venue", "binance-usdm", "--symbols", "A,A"), "twice"),
        (("--venue", "binance-usdm", "--symbols", "BTCUSDT", "--ws-url", "ftp://x"), "ws_url"),
        (("--venue", "simulated", "--symbols", "BTC-USD", "--ws-url", "ws://x"), "unknown keys"),
    ],
)
def test_feed_add_refuses_bad_input_and_creates_nothing(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _run("feed", "add", "f1", *args)
    assert not Feed.objects.exists() and not Instrument.objects.exists()


def test_feed_add_refuses_an_existing_name() -> None:
    make_feed("sim")
    with pytest.raises(CommandError, match="already exists"):
        _run("feed", "add", "sim", "--venue", "simulated", "--symbols", "X")


def test_feed_list_enable_and_disable() -> None:
    _run("feed", "add", "bin", "--venue", "binance-usdm", "--symbols", "BTCUSDT", "--rest-url", "http://127.0.0.1:1")
    assert "disabled" in _run("feed", "disable", "bin")
    assert not Feed.objects.get(name="bin").enabled
    listing = _run("feed", "list")
    assert (
        "bin" in listing and "disabled" in listing and "BTCUSDT" in listing and "rest_url=http://127.0.0.1:1" in listing
    )
    _run("feed", "enable", "bin")
    assert Feed.objects.get(name="bin").enabled
    with pytest.raises(CommandError, match="no feed named"):
        _run("feed", "enable", "missing")


def _tick(instrument: Instrument, ts_ms: int, trade_id: str, price: str, volume: str) -> Tick:
    return Tick.objects.create(
        instrument=instrument,
        ts_event=ts_ms * 1_000_000,
        ts_recv=ts_ms * 1_000_000 + 1,
        price=parse_fixed(price),
        volume=parse_fixed(volume),
        trade_id=trade_id,
        side="sell",
    )


def test_exportticks_writes_exact_decimals_ordered_by_time_then_numeric_trade_id(tmp_path) -> None:  # type: ignore[no-untyped-def]
    instrument = make_feed("bin", ("BTCUSDT",)).instruments.get()
    _tick(instrument, 2000, "10", "64000.123456789012", "0.000000000001")
    _tick(instrument, 1000, "9", "0.000000000012", "1230")
    _tick(instrument, 2000, "8", "1.000", "0.5")  # a trade id is unique per instrument
    out = _run("exportticks", "--symbol", "BTCUSDT")
    assert out.splitlines() == [
        "ts_ms,symbol,price,volume",
        "1000,BTCUSDT,0.000000000012,1230",
        "2000,BTCUSDT,1,0.5",
        "2000,BTCUSDT,64000.123456789012,0.000000000001",
    ]
    target = tmp_path / "ticks.csv"
    _run(
        "exportticks",
        "--symbol",
        "BTCUSDT",
        "--feed",
        "bin",
        "--from",
        "1970-01-01T00:00:01.500",
        "--to",
        "1970-01-01T00:00:03Z",
        "--output",
        str(target),
    )
    assert target.read_text().splitlines()[1:] == [
        "2000,BTCUSDT,1,0.5",
        "2000,BTCUSDT,64000.123456789012,0.000000000001",
    ]


def test_exportticks_names_the_problem() -> None:
    make_feed("a", ("BTCUSDT",))
    make_feed("b", ("BTCUSDT",))
    with pytest.raises(CommandError, match="several feeds"):
        _run("exportticks", "--symbol", "BTCUSDT")
    with pytest.raises(CommandError, match="no instrument"):
        _run("exportticks", "--symbol", "DOGE")
    with pytest.raises(CommandError, match="ISO 8601"):
        _run("exportticks", "--symbol", "BTCUSDT", "--feed", "a", "--from", "yesterday")


def test_recorded_ticks_returns_a_window_as_market_data() -> None:
    instrument = make_feed("bin", ("BTCUSDT",)).instruments.get()
    for ts_ms, trade_id in ((1000, "1"), (2000, "2"), (3000, "3")):
        _tick(instrument, ts_ms, trade_id, "5.000000000001", "1")
    ticks = recorded_ticks("bin", "BTCUSDT", 2000 * 10**6, 3000 * 10**6)
    assert len(ticks) == 1
    [tick] = ticks
    assert (tick.symbol, tick.trade_id, tick.price, tick.volume, tick.ts_event, tick.side) == (
        "BTCUSDT",
        "2",
        parse_fixed("5.000000000001"),
        parse_fixed("1"),
        2000 * 10**6,
        Side.SELL,
    )
    with pytest.raises(InstrumentNotFound):
        recorded_ticks("bin", "ETHUSDT", 0, 1)
    with pytest.raises(ValueError):
        recorded_ticks("bin", "BTCUSDT", 5, 1)
