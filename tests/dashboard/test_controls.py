"""Controls: confirmed, permission-checked, audited; kill switches stop new entries."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from dashboard.models import ControlAction, ControlAudit
from dashboard.selectors import entries_halted, entries_halted_by_account
from orders.models import Account, TradeSetting
from processor.models import Strategy

pytestmark = pytest.mark.django_db
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def strategy() -> Strategy:
    return Strategy.objects.create(name="ema-x", kind="ema", params={"timeframe_s": 60, "fast": 3, "slow": 5})


def login(username: str, *, staff: bool = False) -> tuple[Client, Account]:
    user = get_user_model().objects.create_user(username, password="pw-long-enough-123", is_staff=staff)
    account = Account.objects.create(owner=user, name=f"{username}-main", allocated_capital=Decimal("1000"))
    client = Client()
    client.force_login(user)
    return client, account


def test_a_change_without_confirmation_changes_nothing(strategy: Strategy) -> None:
    client, _ = login("ops", staff=True)
    response = client.post(f"/controls/strategies/{strategy.pk}/", {"enabled": "0"}, **JSON)
    assert response.status_code == 400
    strategy.refresh_from_db()
    assert strategy.enabled and not ControlAudit.objects.exists()


def test_staff_disable_a_strategy_and_the_change_is_audited(strategy: Strategy) -> None:
    client, _ = login("ops", staff=True)
    response = client.post(
        f"/controls/strategies/{strategy.pk}/", {"enabled": "0", "confirm": "yes", "reason": "drawdown"}, **JSON
    )
    assert response.json() == {"ok": True, "message": "strategy ema-x disabled"}
    strategy.refresh_from_db()
    assert not strategy.enabled
    audit = ControlAudit.objects.get()
    assert (audit.actor_name, audit.action, audit.target, audit.reason) == (
        "ops",
        ControlAction.STRATEGY_DISABLE,
        "strategy ema-x",
        "drawdown",
    )
    assert (audit.before, audit.after) == ({"enabled": True}, {"enabled": False})


def test_a_user_who_is_not_staff_cannot_switch_a_shared_strategy(strategy: Strategy) -> None:
    client, _ = login("trader")
    response = client.post(f"/controls/strategies/{strategy.pk}/", {"enabled": "0", "confirm": "yes"}, **JSON)
    assert response.status_code == 403
    strategy.refresh_from_db()
    assert strategy.enabled


def test_a_user_switches_their_own_trade_setting_but_never_anothers(strategy: Strategy) -> None:
    alice, alice_account = login("alice")
    _, bob_account = login("bob")
    mine = TradeSetting.objects.create(strategy=strategy, account=alice_account, quantity=Decimal("1"))
    theirs = TradeSetting.objects.create(strategy=strategy, account=bob_account, quantity=Decimal("1"))
    assert (
        alice.post(f"/controls/trade-settings/{mine.pk}/", {"enabled": "0", "confirm": "yes"}, **JSON).status_code
        == 200
    )
    assert (
        alice.post(f"/controls/trade-settings/{theirs.pk}/", {"enabled": "0", "confirm": "yes"}, **JSON).status_code
        == 404
    )
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert not mine.enabled and theirs.enabled
    assert ControlAudit.objects.get().account_id == alice_account.pk


def test_an_account_kill_switch_halts_entries_on_that_account_only() -> None:
    alice, alice_account = login("alice")
    _, bob_account = login("bob")
    response = alice.post(
        f"/controls/kill-switch/{alice_account.pk}/",
        {"engaged": "1", "confirm": "yes", "reason": "going to lunch"},
        **JSON,
    )
    assert response.status_code == 200
    assert entries_halted(account_id=alice_account.pk) == "account kill switch engaged: going to lunch"
    assert entries_halted(account_id=bob_account.pk) is None
    assert (
        alice.post(f"/controls/kill-switch/{bob_account.pk}/", {"engaged": "1", "confirm": "yes"}, **JSON).status_code
        == 404
    )
    alice.post(f"/controls/kill-switch/{alice_account.pk}/", {"engaged": "0", "confirm": "yes"}, **JSON)
    assert entries_halted(account_id=alice_account.pk) is None
    assert list(ControlAudit.objects.order_by("id").values_list("action", flat=True)) == [
        ControlAction.KILL_SWITCH_ENGAGE,
        ControlAction.KILL_SWITCH_RELEASE,
    ]


def test_the_global_kill_switch_is_staff_only_and_halts_every_account() -> None:
    trader, trader_account = login("trader")
    ops, ops_account = login("ops", staff=True)
    assert trader.post("/controls/kill-switch/global/", {"engaged": "1", "confirm": "yes"}, **JSON).status_code == 403
    assert entries_halted(account_id=trader_account.pk) is None
    assert ops.post("/controls/kill-switch/global/", {"engaged": "1", "confirm": "yes"}, **JSON).status_code == 200
    assert entries_halted(account_id=trader_account.pk) == "global kill switch engaged"
    assert entries_halted_by_account(trader_account.owner) == {trader_account.pk: "global kill switch engaged"}


def test_the_page_and_every_panel_render_for_a_user(strategy: Strategy) -> None:
    client, account = login("alice", staff=True)
    TradeSetting.objects.create(strategy=strategy, account=account, quantity=Decimal("1"))
    page = client.get("/")
    assert page.status_code == 200
    html = page.content.decode()
    for panel in ("prices", "signals", "accounts", "trading", "controls", "health"):
        assert f'data-panel="{panel}"' in html
        assert client.get(f"/dashboard/panels/{panel}/").status_code == 200
    assert "lightweight-charts.standalone.production.js" in html
    assert "ema-x" in html and "alice-main" in html
    assert client.get("/dashboard/panels/nope/").status_code == 404


def test_operators_panel_is_not_shown_to_other_users() -> None:
    client, _ = login("trader")
    assert 'data-panel="health"' not in client.get("/").content.decode()
    assert "Operators only" in client.get("/dashboard/panels/health/").content.decode()
