"""upstox: protobuf parse, the vtt-delta scenarios (a normal tick, a day boundary, a cold start), repeats, authorize and subscribe."""

from __future__ import annotations

import gzip
import json

import pytest

from core.fixed_point import SCALE
from feeds.market import BookTicker, MarketData, MarketEvent, Ticker, parse_fixed
from feeds.venues import upstox
from feeds.venues.base import ParseError
from feeds.venues.rest import RestError
from tests.feeds.venues import golden
from tests.feeds.venues.fake_http import FakeVenueHttp

KEY = "NSE_EQ|INE848E01016"
HOUR_NS = 3600 * 1_000_000_000
T0 = 1_732_851_000_000_000_000


def tick(vtt: int, ts_event: int, *, price: str = "82.35", ltq: int = 10) -> MarketData:
    return MarketData(
        symbol=KEY,
        price=parse_fixed(price),
        volume=ltq * SCALE,
        ts_event=ts_event,
        ts_recv=ts_event,
        cumulative_volume=vtt * SCALE,
    )


def trades(events: list[MarketEvent]) -> list[MarketData]:
    return [event for event in events if isinstance(event, MarketData)]


# --- the three scenarios of the vtt delta: a normal tick, a day boundary, a cold start -


def test_normal_tick_volume_is_the_vtt_delta() -> None:
    state = upstox.UpstoxStreamState()
    state.apply([tick(1_000, T0)])
    (event,) = trades(state.apply([tick(1_250, T0 + 1_000_000)]))
    assert event.volume == 250 * SCALE
    assert event.duration_since_last_ns is None  # the stream fills it from the previous tick


def test_day_boundary_volume_is_the_whole_vtt_and_duration_resets_to_zero() -> None:
    state = upstox.UpstoxStreamState()
    state.apply([tick(5_000_000, T0)])
    (event,) = trades(state.apply([tick(40_000, T0 + 18 * HOUR_NS)]))
    assert event.volume == 40_000 * SCALE
    assert event.duration_since_last_ns == 0


def test_cold_start_has_zero_volume_because_pre_open_and_restart_look_alike() -> None:
    (event,) = trades(upstox.UpstoxStreamState().apply([tick(1_000_000, T0)]))
    assert event.volume == 0


# --- the two day-boundary triggers --------------------------------------------------------


def test_day_boundary_by_vtt_decrease_even_a_minute_later() -> None:
    state = upstox.UpstoxStreamState()
    state.apply([tick(9_000, T0)])
    (event,) = trades(state.apply([tick(300, T0 + 60 * 1_000_000_000)]))
    assert (event.volume, event.duration_since_last_ns) == (300 * SCALE, 0)


def test_day_boundary_by_more_than_12_hours_while_vtt_grew() -> None:
    # The opening auction traded more than the whole previous day: vtt did not fall.
    state = upstox.UpstoxStreamState()
    state.apply([tick(9_000, T0)])
    (event,) = trades(state.apply([tick(12_000, T0 + 12 * HOUR_NS + 1)]))
    assert (event.volume, event.duration_since_last_ns) == (12_000 * SCALE, 0)


def test_exactly_12_hours_later_is_still_the_same_day() -> None:
    state = upstox.UpstoxStreamState()
    state.apply([tick(9_000, T0)])
    (event,) = trades(state.apply([tick(12_000, T0 + 12 * HOUR_NS)]))
    assert event.volume == 3_000 * SCALE


# --- repeats -------------------------------------------------------------------------------


def test_resent_ltpc_with_the_same_ltt_and_vtt_is_a_depth_update_not_a_trade() -> None:
    state = upstox.UpstoxStreamState()
    state.apply([tick(1_000, T0)])
    quote = BookTicker(KEY, 1, 1, 2, 1, T0 + 5, T0 + 5)
    assert state.apply([tick(1_000, T0), quote]) == [quote]


def test_ltpc_mode_trades_carry_ltq_and_drop_exact_repeats() -> None:
    state = upstox.UpstoxStreamState()
    first = MarketData(symbol="NSE_FO|45450", price=parse_fixed("24180.05"), volume=75 * SCALE, ts_event=T0, ts_recv=T0)
    assert state.apply([first]) == [first]
    assert state.apply([first]) == []
    later = MarketData(
        symbol="NSE_FO|45450", price=parse_fixed("24180.1"), volume=25 * SCALE, ts_event=T0 + 1, ts_recv=T0 + 1
    )
    assert state.apply([later]) == [later]


def test_instruments_keep_separate_state() -> None:
    state = upstox.UpstoxStreamState()
    state.apply([tick(1_000, T0)])
    other = MarketData(
        symbol="NSE_EQ|INE002A01018", price=1, volume=SCALE, ts_event=T0, ts_recv=T0, cumulative_volume=7 * SCALE
    )
    (event,) = trades(state.apply([other]))
    assert event.volume == 0  # cold start for this key, whatever the other key saw


# --- parse ----------------------------------------------------------------------------------


def test_market_info_first_message_gives_no_events() -> None:
    assert upstox.parse(golden.read_frames("upstox")[0], 0) == []


def test_snapshot_without_type_key_is_parsed_like_a_live_feed() -> None:
    events = upstox.parse(golden.read_frames("upstox")[1], 0)
    kinds = {(event.kind, event.symbol) for event in events}
    assert kinds == {("trade", KEY), ("book_ticker", KEY), ("ticker", "NSE_INDEX|Nifty 50")}


def test_ltpc_trade_is_price_ltp_quantity_ltq_time_ltt_and_no_side() -> None:
    (trade,) = upstox.parse(golden.read_frames("upstox")[4], 0)
    assert isinstance(trade, MarketData)
    assert (trade.symbol, trade.price, trade.volume, trade.ts_event, trade.side) == (
        "NSE_FO|45450",
        parse_fixed("24180.05"),
        75 * SCALE,
        1732851002990 * 1_000_000,
        None,
    )


def test_index_value_is_a_ticker_not_a_trade() -> None:
    events = upstox.parse(golden.read_frames("upstox")[1], 0)
    (index,) = [event for event in events if event.symbol == "NSE_INDEX|Nifty 50"]
    assert isinstance(index, Ticker) and index.last_price == parse_fixed("24123.45")


def test_instrument_without_a_trade_yet_gives_nothing_rather_than_a_zero_price() -> None:
    assert upstox.parse(golden.read_frames("upstox")[7], 0) == []


def test_a_double_that_is_not_a_plain_price_is_rejected() -> None:
    with pytest.raises(ParseError) as info:
        upstox.parse(golden.read_frames("upstox")[10], 0)
    assert info.value.reason == "number"


def test_recorded_stream_through_the_state_gives_vtt_deltas_and_drops_the_repeat() -> None:
    state = upstox.UpstoxStreamState()
    volumes = []
    for frame in golden.read_frames("upstox")[:7]:
        volumes += [(event.symbol, event.volume) for event in trades(state.apply(upstox.parse(frame, 0)))]
    assert volumes == [
        (KEY, 0),  # snapshot: cold start
        (KEY, 50 * SCALE),  # live tick: 1_000_050 - 1_000_000
        # the depth-only frame re-sent the same LTPC: no trade
        ("NSE_FO|45450", 75 * SCALE),  # ltpc mode: ltq
        ("NSE_FO|54321", 0),  # option greeks mode carries vtt: cold start
        (KEY, 2_000_000 * SCALE),  # next day, more than 12 h later: the whole vtt
    ]


# --- dialling -----------------------------------------------------------------------------


def test_subscribe_request_is_json_bytes_for_a_binary_frame() -> None:
    message = upstox.subscribe_message([KEY, "NSE_INDEX|Nifty 50"], "full", guid="g1")
    assert isinstance(message, bytes)
    assert json.loads(message) == {
        "guid": "g1",
        "method": "sub",
        "data": {"mode": "full", "instrumentKeys": [KEY, "NSE_INDEX|Nifty 50"]},
    }


def test_subscribe_refuses_more_keys_than_the_mode_allows() -> None:
    with pytest.raises(ValueError):
        upstox.subscribe_message([f"NSE_FO|{n}" for n in range(2001)], "full")


async def test_every_dial_authorizes_with_the_provided_token_and_uses_the_single_use_url(
    fake_http: FakeVenueHttp,
) -> None:
    uris = iter(["wss://ws.example.test/feed?code=one", "wss://ws.example.test/feed?code=two"])
    tokens = []

    async def token_provider() -> str:
        tokens.append("analytics-token")
        return "analytics-token"

    venue = upstox.UpstoxVenue(token_provider)
    settings = venue.clean_settings({"rest_url": fake_http.base_url, "mode": "ltpc"})
    urls = []
    for _ in range(2):
        body = json.dumps({"status": "success", "data": {"authorized_redirect_uri": next(uris)}}).encode()
        fake_http.serve("GET", "/v3/feed/market-data-feed/authorize", body)
        (endpoint,) = await venue.endpoints([KEY], {"trades"}, settings)
        urls.append(endpoint.url)
        assert json.loads(endpoint.subscribe[0])["data"]["mode"] == "ltpc"
    assert urls == ["wss://ws.example.test/feed?code=one", "wss://ws.example.test/feed?code=two"]
    assert len(tokens) == 2
    assert all(request.headers["Authorization"] == "Bearer analytics-token" for request in fake_http.requests)


async def test_an_invalid_token_is_a_401_rest_error(fake_http: FakeVenueHttp) -> None:
    body = b'{"status":"error","errors":[{"errorCode":"UDAPI100050","message":"Invalid token used to access API"}]}'
    fake_http.serve("GET", "/v3/feed/market-data-feed/authorize", body, status=401)

    async def token_provider() -> str:
        return "expired"

    with pytest.raises(RestError) as info:
        await upstox.UpstoxVenue(token_provider).endpoints([KEY], {"trades"}, {"rest_url": fake_http.base_url})
    assert info.value.status == 401 and b"UDAPI100050" in info.value.body


async def test_without_a_token_provider_dialling_says_so() -> None:
    with pytest.raises(LookupError):
        await upstox.UpstoxVenue().endpoints([KEY], {"trades"}, {})


def test_settings_refuse_an_unknown_mode() -> None:
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        upstox.VENUE.clean_settings({"mode": "full_d99"})


def test_instruments_file_tick_sizes_are_paise_turned_into_rupees() -> None:
    rows = [
        {"segment": "NSE_EQ", "instrument_key": KEY, "trading_symbol": "NHPC", "lot_size": 1, "tick_size": 5.0},
        {
            "segment": "NSE_FO",
            "instrument_key": "NSE_FO|45450",
            "trading_symbol": "NIFTY FUT",
            "lot_size": 75,
            "tick_size": 10.0,
        },
    ]
    instruments = upstox.parse_instruments(gzip.compress(json.dumps(rows).encode()))
    assert [(meta.venue_symbol, meta.tick_size, meta.lot_size) for meta in instruments] == [
        (KEY, "0.05", "1"),
        ("NSE_FO|45450", "0.1", "75"),
    ]
    with pytest.raises(ParseError):
        upstox.parse_instruments(b"\x1f\x8b not really gzip")


# --- recovery's analytics token -------------------------------------------------------------


class FakeAccessToken:
    def __init__(self, secret: str) -> None:
        self._secret = secret
        self.fingerprint = f"fp-{secret}"

    def reveal(self) -> str:
        return self._secret


class FakeTokenSource:
    """Stands in for recovery's TokenSource: hands out a token, records invalidations."""

    def __init__(self, secret: str) -> None:
        self.token = FakeAccessToken(secret)
        self.invalidated: list[tuple[str, str]] = []

    async def await_valid_token(self) -> FakeAccessToken:
        return self.token

    async def invalidate(self, fingerprint: str, reason: str) -> None:
        self.invalidated.append((fingerprint, reason))


async def test_a_token_source_authorizes_the_dial(fake_http: FakeVenueHttp) -> None:
    fake_http.serve(
        "GET",
        "/v3/feed/market-data-feed/authorize",
        b'{"status":"success","data":{"authorized_redirect_uri":"wss://x/feed?code=1"}}',
    )
    venue, source = upstox.UpstoxVenue(), FakeTokenSource("provisioned")
    venue.use_token_source(source)
    (endpoint,) = await venue.endpoints([KEY], {"trades"}, {"rest_url": fake_http.base_url})
    assert endpoint.url == "wss://x/feed?code=1"
    assert fake_http.requests[0].headers["Authorization"] == "Bearer provisioned"
    assert source.invalidated == []


async def test_a_refused_token_is_reported_back_to_its_source(fake_http: FakeVenueHttp) -> None:
    body = b'{"status":"error","errors":[{"errorCode":"UDAPI100050","message":"Invalid token used to access API"}]}'
    fake_http.serve("GET", "/v3/feed/market-data-feed/authorize", body, status=401)
    venue, source = upstox.UpstoxVenue(), FakeTokenSource("stale")
    venue.use_token_source(source)
    with pytest.raises(RestError):
        await venue.endpoints([KEY], {"trades"}, {"rest_url": fake_http.base_url})
    assert source.invalidated == [("fp-stale", "UDAPI100050")]


async def test_other_errors_do_not_invalidate_the_token(fake_http: FakeVenueHttp) -> None:
    fake_http.serve("GET", "/v3/feed/market-data-feed/authorize", b'{"status":"error"}', status=500)
    venue, source = upstox.UpstoxVenue(), FakeTokenSource("fine")
    venue.use_token_source(source)
    with pytest.raises(RestError):
        await venue.endpoints([KEY], {"trades"}, {"rest_url": fake_http.base_url})
    assert source.invalidated == []


async def test_startup_hands_the_configured_analytics_token_to_the_venue(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.runtime.core import RuntimeContext
    from core.runtime.startup_value import StartupValue
    from feeds.startup import FeedHubs
    from feeds.upstox_datasource import UpstoxDataSource
    from feeds.upstox_startup import upstox_token_startup_tasks
    from recovery.tokens import TokenKey, TokenKind

    source = FakeTokenSource("from-recovery")
    source.key = TokenKey("upstox", TokenKind.ANALYTICS)  # type: ignore[attr-defined]
    asked: list[TokenKey] = []
    registered: list[tuple[TokenKey, object]] = []

    class AuthState:
        def token_source(self, key: TokenKey) -> FakeTokenSource:
            asked.append(key)
            return source

        def register_datasource(self, key: TokenKey, datasource: object) -> None:
            registered.append((key, datasource))

    venue = upstox.UpstoxVenue()
    monkeypatch.setattr(upstox, "VENUE", venue)
    ctx = RuntimeContext()
    auth_state: StartupValue[AuthState] = StartupValue("token state")
    auth_state.provide(AuthState())
    (task,) = upstox_token_startup_tasks(FeedHubs(), auth_state)  # type: ignore[arg-type]
    await task.run(ctx)
    assert asked == [TokenKey("upstox", TokenKind.ANALYTICS)]
    # The venue dials through the feed's datasource, which recovery resumes.
    [(key, datasource)] = registered
    assert key == asked[0] and isinstance(datasource, UpstoxDataSource)
    assert venue._token_source is datasource
    assert (await datasource.await_valid_token()).reveal() == "from-recovery"


async def test_startup_without_an_analytics_token_leaves_the_venue_refusing_to_dial(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from core.runtime.core import RuntimeContext
    from core.runtime.startup_value import StartupValue
    from feeds.startup import FeedHubs
    from feeds.upstox_startup import upstox_token_startup_tasks

    class AuthState:
        def token_source(self, key: object) -> None:
            raise KeyError(key)

    venue = upstox.UpstoxVenue()
    monkeypatch.setattr(upstox, "VENUE", venue)
    ctx = RuntimeContext()
    auth_state: StartupValue[AuthState] = StartupValue("token state")
    auth_state.provide(AuthState())
    await upstox_token_startup_tasks(FeedHubs(), auth_state)[0].run(ctx)  # type: ignore[arg-type]
    with pytest.raises(LookupError):
        await venue.endpoints([KEY], {"trades"}, {})
