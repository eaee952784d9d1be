"""Unknown broker outcomes are resolved within a bounded time on every broker, or put to a person.

By the broker's order list where it has one; where listing fails, by looking the
client id up; where that fails too (the Upstox sandbox serves no reads at all), the
intent is marked unresolved and, past ORDERS_UNRESOLVED_PROMPT_AFTER_S, a person is
asked: the prompt is audited, on health, and on the dashboard with two actions.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from core.health import Status
from dashboard.models import ControlAudit
from feeds.market import parse_fixed
from orders.brokers.base import OrderRequest
from orders.brokers.binance_usdm import BinanceUsdmBroker
from orders.brokers.registry import BrokerRegistry
from orders.brokers.upstox import UpstoxBroker
from orders.ledger import ledger_check
from orders.lifecycle import IntentSpec, intent_create
from orders.models import AuditEvent, CapitalLedger, Order, OrderIntent
from orders.reconciliation import reconcile_account
from orders.services import reconcile_all
from orders.startup import rebuild_health
from tests.fakes.brokers.binance_usdm_orders import API_KEY, API_SECRET, FakeBinanceOrders
from tests.fakes.brokers.upstox_orders import FakeUpstoxOrders
from tests.orders.factories import make_instrument, make_setup, market_entry_spec
from tests.orders.test_upstox_broker import StaticTokens

pytestmark = pytest.mark.django_db(transaction=True)

NHPC = "NSE_EQ|INE848E01016"


@pytest.fixture
def upstox() -> Iterator[FakeUpstoxOrders]:
    with FakeUpstoxOrders({"sandbox-token"}) as fake:
        yield fake


def _sandbox(venue: FakeUpstoxOrders) -> UpstoxBroker:
    return UpstoxBroker(
        tokens=StaticTokens("sandbox-token"),
        order_url=venue.base_url,
        api_url=venue.base_url,
        sandbox=True,
        timeout_s=5,
    )


def _setup_upstox_sandbox():  # type: ignore[no-untyped-def]
    instrument = make_instrument("upstox", NHPC, venue="upstox")
    return make_setup(broker="upstox", mode="sandbox", quantity="10", instrument=instrument)


async def _placed_but_the_answer_was_lost(setup, broker, symbol: str) -> IntentSpec:  # type: ignore[no-untyped-def]
    """The executor's order of steps: intent and reservation first, then the broker; its answer never arrived."""
    spec = market_entry_spec(
        setup,
        f"ts-{setup.account.pk}-lostanswer000001",
        quantity=parse_fixed("10"),
        price=parse_fixed("82.5"),
        reserve=parse_fixed("830"),
    )
    await database_sync_to_async(intent_create)(spec=spec)
    await broker.place_order(OrderRequest(spec.client_order_id, symbol, "BUY", "MARKET", spec.quantity, None))
    return spec


async def test_a_broker_that_serves_no_reads_leads_to_an_operator_prompt_on_health(upstox: FakeUpstoxOrders) -> None:
    setup = await database_sync_to_async(_setup_upstox_sandbox)()
    broker = _sandbox(upstox)
    try:
        spec = await _placed_but_the_answer_was_lost(setup, broker, NHPC)

        first = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts", prompt_after_s=300)

        # Each read degraded on its own; the intent is unresolved and its clock started.
        assert set(first.degraded_steps) == {"open_orders", "lookup", "fills", "positions"}
        assert first.unresolved == (spec.client_order_id,) and first.awaiting_decision == ()
        intent = await database_sync_to_async(OrderIntent.objects.get)(client_order_id=spec.client_order_id)
        assert intent.state == OrderIntent.State.PENDING
        assert intent.unresolved_since is not None and intent.operator_prompted_at is None

        # Still unresolvable past the limit (0 here, so no clock has to run): a person is asked.
        registry = BrokerRegistry(factories={("upstox", "sandbox"): lambda: broker})
        [second] = await reconcile_all(registry=registry)
    finally:
        await broker.close()
    # The periodic pass used the configured limit (300 s) and did not prompt yet.
    assert second.awaiting_decision == ()
    again = await reconcile_account(account_id=setup.account.pk, broker=_sandbox(upstox), prefix="ts", prompt_after_s=0)
    [waiting] = again.awaiting_decision
    assert (waiting.client_order_id, waiting.reserved) == (spec.client_order_id, parse_fixed("830"))

    def prompted() -> None:
        intent = OrderIntent.objects.get(client_order_id=spec.client_order_id)
        assert intent.state == OrderIntent.State.PENDING and intent.operator_prompted_at is not None
        event = AuditEvent.objects.get(event="reconcile.operator_prompt")
        assert event.client_order_id == spec.client_order_id and event.details["reserved"] == "830"
        assert CapitalLedger.objects.get(account=setup.account).reserved_for_orders == parse_fixed("830")

    await database_sync_to_async(prompted)()
    status, reason = rebuild_health([again], halting=True)
    assert status == Status.DEGRADED
    assert f"orders needing a decision {setup.account.pk}: 1 reserving 830" in reason


@pytest.fixture
def binance() -> Iterator[FakeBinanceOrders]:
    with FakeBinanceOrders() as fake:
        yield fake


async def test_where_listing_fails_the_intent_is_looked_up_by_its_client_id(binance: FakeBinanceOrders) -> None:
    setup = await database_sync_to_async(make_setup)(broker="binance-usdm", mode="sandbox")
    broker = BinanceUsdmBroker(api_key=API_KEY, secret=API_SECRET, demo=False, fapi_url=binance.base_url, timeout_s=5)
    try:
        spec = IntentSpec(
            client_order_id=f"ts-{setup.account.pk}-lostanswer000002",
            account_id=setup.account.pk,
            strategy_id=setup.strategy.pk,
            instrument_id=setup.instrument.pk,
            intent="ENTRY",
            position_side="LONG",
            side="BUY",
            order_type="MARKET",
            quantity=parse_fixed("0.01"),
            price=parse_fixed("50000"),
            reserve=parse_fixed("503"),
        )
        await database_sync_to_async(intent_create)(spec=spec)
        await broker.place_order(OrderRequest(spec.client_order_id, "BTCUSDT", "BUY", "MARKET", spec.quantity, None))
        binance.unavailable |= {"openOrders", "userTrades"}

        result = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
    finally:
        await broker.close()
    assert set(result.degraded_steps) == {"open_orders", "fills"}
    assert result.corrections == {"Adopt": 1} and result.unresolved == ()
    assert await database_sync_to_async(Order.objects.filter(client_order_id=spec.client_order_id).exists)()


async def _prompted_intent(upstox: FakeUpstoxOrders):  # type: ignore[no-untyped-def]
    setup = await database_sync_to_async(_setup_upstox_sandbox)()
    broker = _sandbox(upstox)
    try:
        spec = await _placed_but_the_answer_was_lost(setup, broker, NHPC)
        for _ in range(2):  # the first pass starts the clock, the second prompts
            await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts", prompt_after_s=0)
    finally:
        await broker.close()
    return setup, spec


async def test_the_dashboard_lists_the_order_and_its_owner_releases_the_reservation(upstox: FakeUpstoxOrders) -> None:
    setup, spec = await _prompted_intent(upstox)

    def decide() -> None:
        owner = Client(enforce_csrf_checks=True)
        owner.force_login(setup.account.owner)
        page = owner.get("/").content.decode()
        panel = page[page.index('id="panel-unresolved"') :]
        assert "Orders needing a decision" in panel
        start = panel.index(f'data-intent="{spec.client_order_id}"')
        row = panel[start : panel.index("</tr>", start)]
        for shown in (setup.account.name, NHPC, "BUY", ">10<", ">830<"):
            assert shown in row, shown
        # The panel alone, as the browser refreshes it after a pushed change.
        assert f'data-intent="{spec.client_order_id}"' in owner.get("/dashboard/panels/unresolved/").content.decode()
        url = f"/controls/intents/{spec.client_order_id}/release/"
        # No CSRF token: refused.
        assert owner.post(url, {"confirm": "yes"}).status_code == 403
        # Another user: the same answer as an order that does not exist.
        intruder = Client()
        intruder.force_login(get_user_model().objects.create_user(username="intruder", password="pw-123456"))
        assert intruder.post(url, {"confirm": "yes"}, HTTP_ACCEPT="application/json").status_code == 404
        assert "Orders needing a decision" in intruder.get("/").content.decode()
        assert f'data-intent="{spec.client_order_id}"' not in intruder.get("/").content.decode()
        token = owner.cookies["csrftoken"].value
        answer = owner.post(
            url,
            {"confirm": "yes", "reason": "checked the order book"},
            HTTP_ACCEPT="application/json",
            HTTP_X_CSRFTOKEN=token,
        )
        assert answer.status_code == 200 and answer.json()["ok"], answer.content

        intent = OrderIntent.objects.get(client_order_id=spec.client_order_id)
        assert intent.state == OrderIntent.State.ABANDONED
        assert CapitalLedger.objects.get(account=setup.account).reserved_for_orders == 0
        assert ledger_check(account_id=setup.account.pk).ok
        audit = ControlAudit.objects.get(action="intent.release")
        assert audit.actor == setup.account.owner and audit.account_id == setup.account.pk
        assert audit.reason == "checked the order book" and audit.before["reserved"] == "830"
        assert AuditEvent.objects.filter(event="reconcile.abandon", client_order_id=spec.client_order_id).exists()
        assert f'data-intent="{spec.client_order_id}"' not in owner.get("/").content.decode()

    await database_sync_to_async(decide)()


async def test_keep_waiting_withdraws_the_prompt_and_restarts_the_clock(upstox: FakeUpstoxOrders) -> None:
    setup, spec = await _prompted_intent(upstox)
    before = await database_sync_to_async(OrderIntent.objects.get)(client_order_id=spec.client_order_id)

    def wait() -> None:
        owner = Client()
        owner.force_login(setup.account.owner)
        answer = owner.post(
            f"/controls/intents/{spec.client_order_id}/wait/", {"confirm": "yes"}, HTTP_ACCEPT="application/json"
        )
        assert answer.status_code == 200 and answer.json()["ok"]
        intent = OrderIntent.objects.get(client_order_id=spec.client_order_id)
        assert intent.state == OrderIntent.State.PENDING and intent.operator_prompted_at is None
        assert intent.unresolved_since > before.unresolved_since
        assert ControlAudit.objects.filter(action="intent.keep_waiting", actor=setup.account.owner).exists()
        assert CapitalLedger.objects.get(account=setup.account).reserved_for_orders == parse_fixed("830")

    await database_sync_to_async(wait)()
    broker = _sandbox(upstox)
    try:
        result = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts", prompt_after_s=300)
        assert result.awaiting_decision == ()  # asked again only once the limit has passed again
        result = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts", prompt_after_s=0)
        assert [d.client_order_id for d in result.awaiting_decision] == [spec.client_order_id]
    finally:
        await broker.close()


async def test_an_unconfirmed_decision_changes_nothing(upstox: FakeUpstoxOrders) -> None:
    setup, spec = await _prompted_intent(upstox)

    def unconfirmed() -> None:
        owner = Client()
        owner.force_login(setup.account.owner)
        answer = owner.post(f"/controls/intents/{spec.client_order_id}/release/", {}, HTTP_ACCEPT="application/json")
        assert answer.status_code == 400
        assert OrderIntent.objects.get(client_order_id=spec.client_order_id).state == OrderIntent.State.PENDING

    await database_sync_to_async(unconfirmed)()
