"""A Dzengi feed set up from `manage.py feed add` and from the admin, demo account included."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from feeds.models import Feed, Instrument, MarketType

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_feed_add_takes_the_venue_spelling_and_the_demo_setting() -> None:
    out = _run(
        "feed", "add", "dz-demo", "--venue", "dzengi", "--symbols", "BTC/USD,Oil - Brent", "--setting", "demo=true"
    )
    assert "dz-demo: added (dzengi, enabled)" in out
    feed = Feed.objects.get(name="dz-demo")
    assert feed.market_type == MarketType.SPOT
    assert feed.settings["demo"] is True
    assert feed.settings["ws_url"] == "wss://demo-api-adapter.dzengi.com"
    assert feed.settings["rest_url"] == "https://demo-api-adapter.dzengi.com"
    assert sorted(Instrument.objects.values_list("symbol", "venue_symbol")) == [
        ("BTC/USD", "BTC/USD"),
        ("OIL-BRENT", "Oil - Brent"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--setting", "demo=maybe"), "demo must be true or false"),
        (("--setting", "api_version=v9"), "api_version"),
        (("--setting", "=x"), "KEY=VALUE"),
        (("--setting", "nope"), "KEY=VALUE"),
        (("--setting", "colour=red"), "unknown keys"),
    ],
)
def test_feed_add_refuses_bad_dzengi_settings_and_creates_nothing(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _run("feed", "add", "dz", "--venue", "dzengi", "--symbols", "BTC/USD", *args)
    assert not Feed.objects.exists()


@pytest.fixture
def root() -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-long-enough-123"))
    return client


def _form(settings: str) -> dict[str, str]:
    return {
        "name": "dz",
        "venue": "dzengi",
        "market_type": "spot",
        "enabled": "on",
        "settings": settings,
        "instruments-TOTAL_FORMS": "0",
        "instruments-INITIAL_FORMS": "0",
        "_save": "Save",
    }


def test_the_admin_saves_a_dzengi_feed_with_its_settings_cleaned(root: Client) -> None:
    assert root.post("/admin/feeds/feed/add/", _form('{"demo": true, "api_version": "v2"}')).status_code == 302
    assert Feed.objects.get().settings == {
        "demo": True,
        "api_version": "v2",
        "ws_url": "wss://demo-api-adapter.dzengi.com",
        "rest_url": "https://demo-api-adapter.dzengi.com",
    }


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ('{"demo": "yes"}', "demo must be true or false"),
        ('{"api_version": "v3"}', "api_version must be one of v1, v2"),
        ('{"rest_url": "ftp://x"}', "rest_url must be a URL"),
    ],
)
def test_the_admin_names_a_bad_dzengi_setting(root: Client, settings: str, message: str) -> None:
    response = root.post("/admin/feeds/feed/add/", _form(settings))
    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.errors["settings"])
    assert not Feed.objects.exists()
