"""/api/trades/ and /api/performance/: the caller's closed trades only, the trades page's filters, paged."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.orders.trade_fixture import HistoryWorld, history_world_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(history_world: HistoryWorld) -> Client:
    client = Client()
    client.force_login(history_world.history.account.owner)
    return client


def test_trades_list_the_closed_trades_with_their_figures(owner: Client, history_world: HistoryWorld) -> None:
    body = owner.get("/api/trades/").json()
    assert body["count"] == 5
    assert [t["pnl"] for t in body["results"]] == ["19", "-8.8", "4.5", "-12", "9"]
    trade = body["results"][2]
    assert trade == {
        "id": history_world.history.positions[2].pk,
        "account": history_world.history.account.pk,
        "account_name": "history",
        "strategy": "alpha",
        "strategy_id": history_world.history.strategies["alpha"].pk,
        "feed": "sim",
        "symbol": "ETHUSDT",
        "side": "SHORT",
        "entry_at": "2026-11-03T10:00:00+00:00",
        "entry_price": "50",
        "exit_at": "2026-11-03T15:00:00+00:00",
        "exit_price": "45",
        "quantity": "1",
        "duration_s": 5 * 3600,
        "gross_pnl": "5",
        "fees": "0.5",
        "pnl": "4.5",
        "pnl_percent": "9.00",
        "exit_reason": "EXIT_SHORT",
    }


def test_trades_filter_and_page(owner: Client) -> None:
    body = owner.get("/api/trades/?symbol=BTCUSDT&limit=2").json()
    assert body["count"] == 3 and [t["pnl"] for t in body["results"]] == ["19", "-12"]
    assert "offset=2" in body["next"]
    assert [t["pnl"] for t in owner.get("/api/trades/?result=win&side=LONG").json()["results"]] == ["19", "9"]
    assert owner.get("/api/trades/?since=2026-11-10&until=2026-11-30").json()["count"] == 1


@pytest.mark.parametrize(
    "query", ["account=x", "side=UP", "since=soon", "since=2026-12-01&until=2026-11-01", "limit=0", "offset=-1"]
)
@pytest.mark.parametrize("path", ["/api/trades/", "/api/performance/"])
def test_a_bad_filter_is_a_400(owner: Client, path: str, query: str) -> None:
    if path == "/api/performance/" and query.startswith(("limit", "offset")):
        return  # not a paged list
    response = owner.get(f"{path}?{query}")
    assert response.status_code == 400
    name = "until" if "until" in query else query.split("=")[0]
    assert name in response.json()


def test_another_users_trades_are_not_there(history_world: HistoryWorld, owner: Client) -> None:
    other = Client()
    other.force_login(history_world.other.owner)
    theirs = other.get("/api/trades/").json()
    assert theirs["count"] == 1 and theirs["results"][0]["account_name"] == "theirs"
    mine = history_world.history.positions[0].pk
    assert other.get(f"/api/trades/{mine}/").status_code == 404
    assert owner.get(f"/api/trades/?account={history_world.other.pk}").json()["count"] == 0
    assert owner.get(f"/api/performance/?account={history_world.other.pk}").json()["summary"]["trades"] == 0


def test_a_token_reads_them_and_anonymous_gets_401(history_world: HistoryWorld) -> None:
    token = Token.objects.create(user=history_world.history.account.owner)
    client = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert client.get("/api/trades/").json()["count"] == 5
    assert client.get("/api/performance/").json()["summary"]["net_pnl"] == "11.7"
    assert Client().get("/api/trades/").status_code == 401
    assert Client().get("/api/performance/").status_code == 401


def test_the_schema_lists_the_routes(owner: Client) -> None:
    schema = owner.get("/api/schema/?format=json").content.decode()
    assert "/api/trades/" in schema and "/api/performance/" in schema
