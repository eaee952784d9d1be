"""/api/: read-only, session or token, every list scoped to the caller's accounts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from feeds.market import parse_fixed
from orders.models import Fill, Order, Position
from processor.models import StrategySignal
from recovery.models import AuthPrompt
from tests.backtesting.factories import queued_run
from tests.orders.factories import Setup, make_instrument, make_setup, trade_on_paper
from tests.orders.trade_history import RoundTrip, book_round_trip

pytestmark = pytest.mark.django_db(transaction=True)
RESOURCES = ["accounts", "orders", "fills", "positions", "signals", "strategies", "prompts", "backtests", "trades"]


@dataclass
class Trader:
    setup: Setup
    client: Client
    token: str


@pytest.fixture
def traders() -> tuple[Trader, Trader]:
    instrument = make_instrument()
    made = []
    for name in ("alice", "bob"):
        setup = make_setup(username=name, instrument=instrument)
        StrategySignal.objects.create(
            strategy=setup.strategy,
            strategy_name=setup.strategy.name,
            feed="sim",
            symbol="BTCUSDT",
            kind="ENTRY_LONG",
            price_fixed=parse_fixed("50000"),
            emitted_at="2026-11-30T00:00:00Z",
            occurrence_ns=1,
            output_id=f"{name}-out",
        )
        AuthPrompt.objects.create(
            recovery_key=f"https://broker.example/login?{name}",
            broker="upstox",
            kind="oauth",
            owner=setup.account.owner,
            message=f"log in, {name}",
        )
        queued_run(setup.account.owner, instrument)
        client = Client()
        client.force_login(setup.account.owner)
        made.append(Trader(setup, client, Token.objects.create(user=setup.account.owner).key))
    trade_on_paper([t.setup for t in made])
    eth = make_instrument(symbol="ETHUSDT")
    for trader in made:  # one closed trade each, for the trades and performance routes
        opened = datetime(2026, 11, 2, 10, tzinfo=UTC)
        trip = RoundTrip("LONG", "1", "100", "110", "0.1", "0.1", opened, opened + timedelta(hours=1))
        book_round_trip(trader.setup.account, trader.setup.strategy, eth, trip)
    return made[0], made[1]


def ids(client: Client, resource: str, query: str = "", **headers: str) -> set[int]:
    response = client.get(f"/api/{resource}/{query}", **headers)
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def test_every_list_holds_only_the_callers_rows_and_anothers_detail_is_404(traders: tuple[Trader, Trader]) -> None:
    alice, bob = traders
    for resource in RESOURCES:
        mine, theirs = ids(alice.client, resource), ids(bob.client, resource)
        assert mine and theirs, f"{resource}: both users should have rows"
        assert not mine & theirs, f"{resource}: a row is visible to both users"
        for pk in theirs:
            assert alice.client.get(f"/api/{resource}/{pk}/").status_code == 404, resource
        for pk in mine:
            assert alice.client.get(f"/api/{resource}/{pk}/").status_code == 200, resource


def test_a_token_authenticates_without_a_session(traders: tuple[Trader, Trader]) -> None:
    alice, _ = traders
    anonymous = Client()
    assert anonymous.get("/api/orders/").status_code == 401
    assert ids(anonymous, "orders", HTTP_AUTHORIZATION=f"Token {alice.token}") == ids(alice.client, "orders")
    assert anonymous.get("/api/orders/", HTTP_AUTHORIZATION="Token not-a-token").status_code == 401


def test_numbers_are_exact_decimal_strings_and_the_ledger_adds_up(traders: tuple[Trader, Trader]) -> None:
    alice, _ = traders
    (account,) = alice.client.get("/api/accounts/").json()["results"]
    ledger = account["ledger"]
    from decimal import Decimal

    figures = {key: Decimal(value) for key, value in ledger.items()}
    assert figures["available"] == (
        figures["allocated_capital"]
        - figures["reserved_for_orders"]
        - figures["reserved_for_positions"]
        + figures["realized_pnl"]
    )
    # The paper-traded entry (the fixture's closed trade has orders of its own, "hist-...").
    (order,) = [
        o for o in alice.client.get("/api/orders/").json()["results"] if not o["client_order_id"].startswith("hist-")
    ]
    assert (order["status"], order["quantity"], order["filled_quantity"]) == ("FILLED", "0.01", "0.01")
    (position,) = [p for p in alice.client.get("/api/positions/").json()["results"] if p["state"] == "OPEN"]
    assert position["quantity"] == "0.01"
    journal = alice.client.get(f"/api/accounts/{account['id']}/journal/").json()["results"]
    assert [entry["kind"] for entry in journal][-3:] == ["entry_fill", "reserve", "allocate"]


def test_lists_filter_by_query_parameters(traders: tuple[Trader, Trader]) -> None:
    alice, _ = traders
    assert ids(alice.client, "orders", "?status=FILLED") == set(
        Order.objects.filter(account=alice.setup.account).values_list("id", flat=True)
    )
    assert ids(alice.client, "orders", "?status=CANCELED") == set()
    assert ids(alice.client, "positions", "?state=CLOSED") == set(
        Position.objects.filter(account=alice.setup.account, state="CLOSED").values_list("id", flat=True)
    )
    assert ids(alice.client, "positions", "?state=OPEN") == set(
        Position.objects.filter(account=alice.setup.account, state="OPEN").values_list("id", flat=True)
    )
    assert ids(alice.client, "fills") == set(
        Fill.objects.filter(account=alice.setup.account).values_list("id", flat=True)
    )
    assert Position.objects.count() == 4  # each trader: the open paper position and one closed trade


def test_health_is_for_staff_only(traders: tuple[Trader, Trader]) -> None:
    alice, _ = traders
    assert alice.client.get("/api/health/").status_code == 403
    owner = alice.setup.account.owner
    owner.is_staff = True
    owner.save()
    body = alice.client.get("/api/health/").json()
    assert {"status", "readiness", "lockContentionCount", "capitalInvariantViolations", "components"} <= set(body)


def test_the_openapi_schema_documents_every_resource(traders: tuple[Trader, Trader]) -> None:
    alice, _ = traders
    response = alice.client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    import json

    paths = json.loads(response.content)["paths"]
    for resource in [*RESOURCES, "health"]:
        assert f"/api/{resource}/" in paths and f"/api/{resource}/{{id}}/" in paths, resource
    assert "/api/accounts/{id}/journal/" in paths


@pytest.mark.parametrize(
    "path",
    [
        "/api/signals/?strategy=abc",
        "/api/signals/?strategy=99999999999999999999999",
        "/api/orders/?account=1.5",
        "/api/fills/?order=x",
        "/api/positions/?account=-99999999999999999999",
    ],
)
def test_a_filter_value_its_field_cannot_hold_is_a_400_naming_the_parameter(path: str) -> None:
    client = Client()
    client.force_login(make_setup(username="carol").account.owner)
    response = client.get(path)
    assert response.status_code == 400
    assert set(response.json()) == {path.split("?")[1].split("=")[0]}
