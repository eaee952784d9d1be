"""Model validation with a clear error per field, and the admin pages that use it."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.http import HttpRequest  # the login throttle (django-axes) needs a request to authenticate
from django.test import Client

from feeds.models import Feed, Instrument, Subscription
from orders.models import Account, TradeSetting
from processor.models import Strategy
from tradingsite.demo import DEMO_INSTRUMENTS

pytestmark = pytest.mark.django_db


def test_feed_settings_are_validated_by_the_venue() -> None:
    feed = Feed(name="sim2", venue="simulated", market_type="simulated", settings={"interval_ms": 1, "bogus": 1})
    with pytest.raises(ValidationError) as caught:
        feed.full_clean()
    messages = caught.value.message_dict["settings"]
    assert any(m.startswith("interval_ms:") for m in messages)
    assert any("unknown keys ['bogus']" in m for m in messages)


def test_valid_feed_settings_get_their_defaults() -> None:
    feed = Feed(name="sim2", venue="simulated", market_type="simulated", settings={"seed": 3})
    feed.full_clean()
    assert feed.settings["seed"] == 3 and feed.settings["interval_ms"] == 250


def test_unknown_venue_is_a_field_error() -> None:
    with pytest.raises(ValidationError) as caught:
        Feed(name="x", venue="nowhere", market_type="spot").full_clean()
    assert "venue" in caught.value.message_dict


@pytest.mark.parametrize(
    ("kind", "params", "expected"),
    [
        ("ema", {"timeframe_s": 0, "fast": 5, "slow": 20}, "timeframe_s:"),
        ("ema", {"timeframe_s": 60, "fast": 20, "slow": 5}, "slow: slow must be greater than fast"),
        ("ema", {"timeframe_s": 60, "fast": 5}, "slow: This field is required."),
        ("volume_breakout", {"bar_volume": "-1", "lookback": 5, "hold_bars": 3, "cooldown_bars": 0}, "bar_volume:"),
        (
            "volume_breakout",
            {"bar_volume": "10", "lookback": 5, "hold_bars": 3, "cooldown_bars": 0, "x": 1},
            "unknown params ['x']",
        ),
    ],
)
def test_strategy_params_are_validated_per_kind_with_an_error_per_param(kind, params, expected) -> None:
    with pytest.raises(ValidationError) as caught:
        Strategy(name="s", kind=kind, params=params).full_clean()
    assert any(expected in message for message in caught.value.message_dict["params"])


def test_valid_strategy_params_are_normalised_exactly() -> None:
    strategy = Strategy(
        name="vb",
        kind="volume_breakout",
        params={"bar_volume": "12.50", "lookback": "5", "hold_bars": 3, "cooldown_bars": 0},
    )
    strategy.full_clean()
    assert strategy.params == {"bar_volume": "12.50", "lookback": 5, "hold_bars": 3, "cooldown_bars": 0}


def test_subscription_channel_must_be_served_by_the_venue() -> None:
    feed = Feed.objects.create(name="s", venue="simulated", market_type="simulated")
    instrument = Instrument.objects.create(
        feed=feed, symbol="BTC-USD", venue_symbol="BTC-USD", tick_size=Decimal("0.1"), lot_size=Decimal("0.001")
    )
    with pytest.raises(ValidationError) as caught:
        Subscription(instrument=instrument, channel="book_ticker").full_clean()
    assert "serves trades" in caught.value.message_dict["channel"][0]


def test_trade_setting_mode_must_match_the_broker() -> None:
    owner = get_user_model().objects.create_user("o", password="x")
    account = Account.objects.create(owner=owner, name="P", broker="paper", allocated_capital=Decimal(1000))
    strategy = Strategy.objects.create(name="e", kind="ema", params={"timeframe_s": 60, "fast": 5, "slow": 20})
    with pytest.raises(ValidationError) as caught:
        TradeSetting(strategy=strategy, account=account, quantity=Decimal("1"), mode="live").full_clean()
    assert "mode" in caught.value.message_dict
    with pytest.raises(ValidationError):
        TradeSetting(strategy=strategy, account=account, quantity=Decimal("0"), mode="paper").full_clean()


def test_loaddemo_is_idempotent_and_prints_a_generated_password_once(monkeypatch) -> None:
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    first, second = StringIO(), StringIO()
    call_command("loaddemo", stdout=first)
    call_command("loaddemo", stdout=second)
    assert "with password" in first.getvalue()
    assert "with password" not in second.getvalue() and "password unchanged" in second.getvalue()
    password = first.getvalue().split("with password '")[1].split("'")[0]
    assert len(password) >= 12
    assert Client().login(request=HttpRequest(), username="demo", password=password)
    assert Instrument.objects.count() == len(DEMO_INSTRUMENTS) == 5
    assert Subscription.objects.count() == 5
    assert sorted(Strategy.objects.values_list("kind", flat=True)) == ["ema", "volume_breakout"]
    assert Account.objects.get().broker == "paper"
    assert TradeSetting.objects.count() == 2
    for strategy in Strategy.objects.all():
        strategy.full_clean()  # the demo's own params pass validation


def test_loaddemo_uses_demo_password_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("DEMO_PASSWORD", "chosen-password-123")
    out = StringIO()
    call_command("loaddemo", stdout=out)
    assert "chosen-password-123" not in out.getvalue()
    assert Client().login(request=HttpRequest(), username="demo", password="chosen-password-123")


@pytest.mark.parametrize(
    "url",
    [
        "feeds/feed",
        "feeds/instrument",
        "feeds/subscription",
        "processor/strategy",
        "orders/account",
        "orders/tradesetting",
        "core/componenthealth",
    ],
)
def test_admin_changelists_with_filters_and_search_render(admin_client: Client, url: str) -> None:
    call_command("loaddemo", stdout=StringIO())
    response = admin_client.get(f"/admin/{url}/?q=a")
    assert response.status_code == 200
    add = admin_client.get(f"/admin/{url}/add/")
    assert add.status_code in (200, 403)


def test_admin_shows_strategy_param_errors_on_the_form(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/processor/strategy/add/",
        {
            "name": "bad",
            "kind": "ema",
            "params": '{"timeframe_s": 60, "fast": 9, "slow": 3}',
            "enabled": "on",
        },
    )
    assert response.status_code == 200
    assert b"slow: slow must be greater than fast" in response.content
    assert not Strategy.objects.filter(name="bad").exists()


def test_staff_see_only_their_own_accounts_in_the_admin(client: Client) -> None:
    from django.contrib.auth.models import Permission

    users = get_user_model().objects
    alice = users.create_user("alice", password="x", is_staff=True)
    bob = users.create_user("bob", password="x")
    alice.user_permissions.add(*Permission.objects.filter(codename__in=["view_account", "change_account"]))
    Account.objects.create(owner=alice, name="A-acct", allocated_capital=Decimal(1))
    bobs = Account.objects.create(owner=bob, name="B-acct", allocated_capital=Decimal(1))
    client.force_login(alice)
    listing = client.get("/admin/orders/account/")
    assert b"A-acct" in listing.content and b"B-acct" not in listing.content
    assert client.get(f"/admin/orders/account/{bobs.pk}/change/").status_code == 302  # not found -> redirected
