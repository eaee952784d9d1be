"""Feed settings and strategy params: JSON checked against the venue's or kind's declared schema.

Valid JSON of the wrong shape (a list, a string, a number, a boolean), 3,000-deep nesting,
NaN, NUL characters and values of the wrong type are form errors naming the problem;
nothing is saved, and nothing answers 500.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client

from core.json_limits import MAX_JSON_DEPTH, parse_bounded_json, raw_json_depth
from feeds.models import Feed
from feeds.settings_schema import clean_feed_settings
from processor.models import Strategy
from processor.params_schema import clean_strategy_params

pytestmark = pytest.mark.django_db

NOT_OBJECTS = ["[1]", '"x"', "5", "true", "null", "[]", "1.5"]
DEEP = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"a":' * 3000 + "1" + "}" * 3000


@pytest.fixture
def root() -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-long-enough-123"))
    return client


def feed_form(settings: str, venue: str = "simulated") -> dict[str, Any]:
    return {
        "name": "sim2",
        "venue": venue,
        "market_type": "simulated",
        "enabled": "on",
        "settings": settings,
        "instruments-TOTAL_FORMS": "0",
        "instruments-INITIAL_FORMS": "0",
        "_save": "Save",
    }


def strategy_form(params: str, kind: str = "ema") -> dict[str, Any]:
    return {"name": "ema-x", "kind": kind, "params": params, "enabled": "on", "_save": "Save"}


@pytest.mark.parametrize("settings", [*NOT_OBJECTS, DEEP, DEEP_OBJECT, '{"seed": NaN}', '{"a": "\\u0000"}', "{"])
def test_feed_settings_that_are_not_a_bounded_object_are_form_errors(root: Client, settings: str) -> None:
    response = root.post("/admin/feeds/feed/add/", feed_form(settings))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["settings"]
    assert not Feed.objects.exists()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ('{"seed": "1"}', "seed must be an integer"),
        ('{"seed": true}', "seed must be an integer"),
        ('{"interval_ms": 5}', "interval_ms must be an integer from 10 to 60000"),
        ('{"volatility_bps": "high"}', "volatility_bps must be a number"),
        ('{"start_prices": [1]}', "start_prices must be an object"),
        ('{"colour": "red"}', "unknown keys"),
    ],
)
def test_feed_settings_of_the_wrong_type_name_the_setting(root: Client, settings: str, message: str) -> None:
    response = root.post("/admin/feeds/feed/add/", feed_form(settings))
    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.errors["settings"])
    assert not Feed.objects.exists()


def test_exchange_settings_are_checked_by_the_venues_declared_types(root: Client) -> None:
    form = feed_form('{"mark_price_1s": "yes"}', venue="binance-usdm") | {"market_type": "perpetual"}
    response = root.post("/admin/feeds/feed/add/", form)
    assert "mark_price_1s must be true or false" in " ".join(response.context["adminform"].form.errors["settings"])
    form = feed_form('{"mark_price_1s": false}', venue="binance-usdm") | {"market_type": "perpetual"}
    assert root.post("/admin/feeds/feed/add/", form).status_code == 302
    assert Feed.objects.get().settings["mark_price_1s"] is False


def test_good_feed_settings_are_saved_cleaned(root: Client) -> None:
    response = root.post("/admin/feeds/feed/add/", feed_form('{"seed": 7, "interval_ms": 100}'))
    assert response.status_code == 302
    assert Feed.objects.get().settings == {"seed": 7, "interval_ms": 100, "volatility_bps": 5.0, "start_prices": {}}


@pytest.mark.parametrize("params", [*NOT_OBJECTS, DEEP, DEEP_OBJECT, '{"fast": Infinity}', "{"])
def test_strategy_params_that_are_not_a_bounded_object_are_form_errors(root: Client, params: str) -> None:
    response = root.post("/admin/processor/strategy/add/", strategy_form(params))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["params"]
    assert not Strategy.objects.exists()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ('{"timeframe_s": 60, "fast": 3, "slow": 5, "long_only": "maybe"}', "long_only must be true or false"),
        ('{"timeframe_s": 60, "fast": 3, "slow": 5, "long_only": 1}', "long_only must be true or false"),
        ('{"timeframe_s": 60.5, "fast": 3, "slow": 5}', "timeframe_s must be an integer"),
        ('{"timeframe_s": true, "fast": 3, "slow": 5}', "timeframe_s must be an integer"),
        ('{"timeframe_s": [60], "fast": 3, "slow": 5}', "timeframe_s must be an integer"),
        ('{"timeframe_s": 60, "fast": 3, "slow": 5, "extra": 1}', "unknown params"),
    ],
)
def test_strategy_params_of_the_wrong_type_name_the_param(root: Client, params: str, message: str) -> None:
    response = root.post("/admin/processor/strategy/add/", strategy_form(params))
    assert response.status_code == 200
    assert message in " ".join(response.context["adminform"].form.errors["params"])
    assert not Strategy.objects.exists()


def test_a_real_boolean_is_saved_as_given(root: Client) -> None:
    params = '{"timeframe_s": 60, "fast": 3, "slow": 5, "long_only": false}'
    assert root.post("/admin/processor/strategy/add/", strategy_form(params)).status_code == 302
    assert Strategy.objects.get().params["long_only"] is False


def test_decimal_params_take_numbers_or_decimal_strings_not_booleans() -> None:
    base = {"lookback": 5, "hold_bars": 2, "cooldown_bars": 0}
    assert clean_strategy_params("volume_breakout", base | {"bar_volume": "1.5"})["bar_volume"] == "1.5"
    assert clean_strategy_params("volume_breakout", base | {"bar_volume": 2})["bar_volume"] == "2"
    for bad in (True, "lots", None, {"v": 1}):
        with pytest.raises(ValidationError, match="bar_volume must be a number"):
            clean_strategy_params("volume_breakout", base | {"bar_volume": bad})


def test_the_schema_modules_refuse_non_objects_without_the_admin() -> None:
    for value in ([1], "x", 5, True, None):
        with pytest.raises(ValidationError):
            clean_feed_settings("simulated", value)
        with pytest.raises(ValidationError):
            clean_strategy_params("ema", value)
    with pytest.raises(ValidationError, match="unknown venue"):
        clean_feed_settings("nowhere", {})


def test_depth_is_measured_without_parsing() -> None:
    assert raw_json_depth(DEEP) == 3000
    assert raw_json_depth('{"a": "[[[[[[[[[[[[[["}') == 1  # brackets inside strings do not count
    assert raw_json_depth('{"a": "\\"[[[["}') == 1
    with pytest.raises(ValidationError, match="deeper than"):
        parse_bounded_json("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), require_object=False)
    assert parse_bounded_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, require_object=False)
