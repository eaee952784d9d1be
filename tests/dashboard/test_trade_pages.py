"""The closed-trade history page, its CSV and the performance page and figures, against the
hand-computed history of tests.orders.trade_fixture."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard import performance, trade_pages
from dashboard.performance import performance_report, report_json
from dashboard.trade_filters import TradeFilter
from dashboard.trades import closed_trades_for_user
from tests.orders.trade_fixture import HistoryWorld, history_world_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(history_world: HistoryWorld) -> Client:
    client = Client()
    client.force_login(history_world.history.account.owner)
    return client


def _rows(body: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body)))


def test_the_page_lists_the_closed_trades_newest_exit_first(owner: Client, history_world: HistoryWorld) -> None:
    response = owner.get("/trades/")
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [row.position.pk for row in rows] == [p.pk for p in reversed(history_world.history.positions)]
    first = rows[-1]  # trade 1
    assert (first.entry_price, first.exit_price, first.quantity) == (Decimal(100), Decimal(110), "1")
    assert (first.fees, first.gross_pnl, first.pnl, first.pnl_percent) == ("1", "10", "9", Decimal("9.00"))
    assert first.duration_text == "1h 00m 00s"
    html = response.content.decode()
    assert "2026-11-02 10:00:00 UTC" in html and "EXIT_LONG" in html
    assert "theirs" not in html  # the other user's account and trade are not there


def test_filters_narrow_the_trades(owner: Client, history_world: HistoryWorld) -> None:
    strategies = history_world.history.strategies
    cases = {
        f"strategy={strategies['beta'].pk}": ["19"],
        "symbol=ETHUSDT": ["-8.8", "4.5"],
        "side=SHORT": ["4.5"],
        "result=loss": ["-8.8", "-12"],
        "since=2026-11-03&until=2026-11-03": ["4.5", "-12"],
        f"account={history_world.history.account.pk}&result=win&symbol=BTCUSDT": ["19", "9"],
        f"account={history_world.other.pk}": [],  # another user's account: nothing, not theirs
    }
    for query, pnls in cases.items():
        response = owner.get(f"/trades/?{query}")
        assert response.status_code == 200, query
        assert [row.pnl for row in response.context["rows"]] == pnls, query


def test_pages_of_trades_and_a_link_to_the_next(owner: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trade_pages, "TRADES_PER_PAGE", 2)
    first = owner.get("/trades/?symbol=BTCUSDT")
    assert [row.pnl for row in first.context["rows"]] == ["19", "-12"]
    assert 'href="?symbol=BTCUSDT&amp;page=2"' in first.content.decode()
    second = owner.get("/trades/?symbol=BTCUSDT&page=2")
    assert [row.pnl for row in second.context["rows"]] == ["9"]
    assert owner.get("/trades/?page=99").context["page"].number == 3  # past the end: the last page


def test_the_csv_has_every_filtered_trade_with_its_figures(owner: Client) -> None:
    response = owner.get("/trades/export.csv?symbol=BTCUSDT")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = _rows(b"".join(response.streaming_content).decode())  # type: ignore[attr-defined]
    assert [row["pnl"] for row in rows] == ["19", "-12", "9"]
    assert rows[1] | {"trade_id": ""} == {
        "trade_id": "",
        "account": "history",
        "strategy": "alpha",
        "feed": "sim",
        "symbol": "BTCUSDT",
        "side": "LONG",
        "entry_time": "2026-11-02 12:00:00 UTC",
        "entry_price": "110",
        "exit_time": "2026-11-03 09:00:00 UTC",
        "exit_price": "105",
        "quantity": "2",
        "duration_s": str(21 * 3600),
        "gross_pnl": "-10",
        "fees": "2",
        "pnl": "-12",
        "pnl_percent": "-5.45",
        "exit_reason": "EXIT_LONG",
    }


BAD_QUERIES = [
    "account=abc",
    "account=0",
    "account=99999999999999999999999",
    "strategy=-1",
    "side=UP",
    "result=maybe",
    "since=yesterday",
    "until=2026-13-40",
    "since=2026-11-05&until=2026-11-01",
    "symbol=" + "x" * 121,
    "symbol=a%00b",
]


@pytest.mark.parametrize("query", BAD_QUERIES)
@pytest.mark.parametrize("path", ["/trades/", "/trades/export.csv", "/performance/"])
def test_a_bad_filter_is_a_400_naming_it(owner: Client, path: str, query: str) -> None:
    response = owner.get(f"{path}?{query}")
    assert response.status_code == 400, response.content[:300]
    name = query.split("=")[0] if "since=2026-11-05" not in query else "until"
    assert name in response.content.decode()


@pytest.mark.parametrize("page", ["0", "abc", "-1", "1" * 30, "1.5"])
def test_a_bad_page_is_a_400(owner: Client, page: str) -> None:
    assert owner.get(f"/trades/?page={page}").status_code == 400


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(["account", "strategy", "symbol", "side", "result", "since", "until", "page"]),
    value=st.text(max_size=40),
)
def test_no_filter_value_is_a_server_error(owner: Client, name: str, value: str) -> None:
    for path in ("/trades/", "/performance/"):
        assert owner.get(path, {name: value}).status_code in (200, 400)


def test_anonymous_is_sent_to_log_in() -> None:
    for path in ("/trades/", "/trades/export.csv", "/performance/"):
        assert Client().get(path).status_code == 302


# --- performance ------------------------------------------------------------------------------


def _report(history_world: HistoryWorld, query: str = "") -> dict:  # type: ignore[type-arg]
    client = Client()
    client.force_login(history_world.history.account.owner)
    response = client.get(f"/api/performance/?{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_figures_match_the_hand_computed_history(history_world: HistoryWorld) -> None:
    report = _report(history_world)
    assert report["summary"] == {
        "trades": 5,
        "wins": 3,
        "losses": 2,
        "net_pnl": "11.7",
        "gross_profit": "32.5",
        "gross_loss": "-20.8",
        "fees": "5.3",
        "best": "19",
        "worst": "-12",
        "win_rate": "60",
        "profit_factor": "1.5625",
        "average_win": "10.833333333333",
        "average_loss": "-10.4",
    }
    assert (report["capital"], report["max_drawdown"], report["max_drawdown_percent"]) == ("10000", "16.3", "0.16")
    assert report["drawdown_peak_equity"] == "10009"
    assert report["ledger_realized_pnl"] == "11.7"
    assert [(d["start"], d["trades"], d["pnl"]) for d in report["daily"]] == [
        ("2026-11-02", 1, "9"),
        ("2026-11-03", 2, "-7.5"),
        ("2026-11-10", 1, "-8.8"),
        ("2026-12-01", 1, "19"),
    ]
    assert [(w["start"], w["pnl"]) for w in report["weekly"]] == [
        ("2026-11-02", "1.5"),
        ("2026-11-09", "-8.8"),
        ("2026-11-30", "19"),
    ]
    assert [(m["start"], m["trades"], m["pnl"]) for m in report["monthly"]] == [
        ("2026-11-01", 4, "-7.3"),
        ("2026-12-01", 1, "19"),
    ]
    assert [(e["day"], e["equity"]) for e in report["equity_curve"]] == [
        ("2026-11-02", "10009"),
        ("2026-11-03", "10001.5"),
        ("2026-11-10", "9992.7"),
        ("2026-12-01", "10011.7"),
    ]
    assert [(g["name"], g["trades"], g["net_pnl"]) for g in report["by_instrument"]] == [
        ("sim / BTCUSDT", 3, "16"),
        ("sim / ETHUSDT", 2, "-4.3"),
    ]
    assert [(g["name"], g["net_pnl"], g["win_rate"]) for g in report["by_strategy"]] == [
        ("beta", "19", "100"),
        ("alpha", "-7.3", "50"),
    ]
    assert [(g["name"], g["net_pnl"]) for g in report["by_account"]] == [("history", "11.7")]


def test_the_figures_follow_the_filters(history_world: HistoryWorld) -> None:
    alpha = history_world.history.strategies["alpha"].pk
    report = _report(history_world, f"strategy={alpha}")
    assert (report["summary"]["trades"], report["summary"]["net_pnl"]) == (4, "-7.3")
    assert report["summary"]["profit_factor"] == "0.649"  # 13.5 / 20.8 = 0.64903.., at 4 places
    assert report["max_drawdown"] == "16.3"
    wins = _report(history_world, "result=win")
    assert (wins["summary"]["profit_factor"], wins["max_drawdown"]) == (None, "0")


def test_no_trades_gives_empty_figures(history_world: HistoryWorld) -> None:
    report = _report(history_world, "since=2030-01-01")
    assert report["summary"]["trades"] == 0 and report["summary"]["win_rate"] is None
    assert report["max_drawdown"] == "0" and report["equity_curve"] == []


@pytest.mark.parametrize("query", ["", "result=loss", "symbol=BTCUSDT"])
def test_the_drawdown_summed_as_numeric_is_the_bigint_one(
    history_world: HistoryWorld, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """A P&L total too wide for bigint takes the numeric path; it must agree exactly."""
    as_bigint = _report(history_world, query)
    monkeypatch.setattr(performance, "_INT64_LIMIT", 0)
    assert _report(history_world, query) == as_bigint


def test_the_page_shows_the_same_figures(owner: Client) -> None:
    response = owner.get("/performance/")
    assert response.status_code == 200
    html = response.content.decode()
    for element, text in {
        "perf-net-pnl": "11.7",
        "perf-win-rate": "60.00",
        "perf-profit-factor": "1.5625",
        "perf-max-drawdown": "16.3",
        "perf-fees": "5.3",
    }.items():
        assert f'id="{element}"' in html and f">{text}</dd>" in html, element
    assert 'data-points="4"' in html  # the equity curve has one point per day with trades


def test_the_report_reads_only_the_users_trades(history_world: HistoryWorld) -> None:
    other = Client()
    other.force_login(history_world.other.owner)
    report = other.get("/api/performance/").json()
    assert report["summary"]["trades"] == 1 and report["summary"]["net_pnl"] == "-30.2"
    assert [g["name"] for g in report["by_account"]] == ["theirs"]


def test_the_report_function_is_the_api_figures(history_world: HistoryWorld) -> None:
    user = history_world.history.account.owner
    trades = TradeFilter({}, queryset=closed_trades_for_user(user))
    assert trades.is_valid()
    direct = report_json(
        performance_report(trades.qs, capital=0, zone=trades.zone, account_ids=user.accounts.values("pk"))
    )
    assert direct["summary"] == _report(history_world)["summary"]
