"""Adding a strategy kind, as docs/extending.md says: one class, seen by the admin, the live processor and backtests."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence

import pytest
from django import forms
from django.core.management import call_command
from django.test import Client

from feeds.market import MarketData
from processor.models import Strategy
from processor.outputs import OutputRow
from processor.selectors import desired_strategies
from processor.strategies import STRATEGIES, StrategyLogic, kind_choices, register_strategy, unregister_strategy
from processor.strategies.base import SignalRow

pytestmark = pytest.mark.django_db


class ThrowawayParams(forms.Form):
    threshold = forms.IntegerField(min_value=1)


class Throwaway(StrategyLogic):
    kind = "throwaway"
    params_form = ThrowawayParams
    output_names = ("price",)
    fixed_point_outputs = True

    def fold(
        self, ticks: Sequence[MarketData], rows: list[OutputRow], signals: list[SignalRow], *, trading: bool = True
    ) -> None:
        for tick in ticks:
            rows.append((tick.ts_event, tick.ts_event, tick.price))


@pytest.fixture
def throwaway() -> Iterator[type[Throwaway]]:
    register_strategy(Throwaway)
    yield Throwaway
    unregister_strategy(Throwaway.kind)


def test_a_registered_kind_is_offered_by_the_admin_and_gone_once_unregistered(admin_client: Client) -> None:
    register_strategy(Throwaway)
    try:
        assert ("throwaway", "throwaway") in kind_choices()
        assert b'<option value="throwaway">' in admin_client.get("/admin/processor/strategy/add/").content
    finally:
        unregister_strategy(Throwaway.kind)
    assert "throwaway" not in STRATEGIES
    assert b'<option value="throwaway">' not in admin_client.get("/admin/processor/strategy/add/").content


def test_the_admin_validates_its_params_with_an_error_per_parameter(admin_client: Client, throwaway: type) -> None:
    response = admin_client.post(
        "/admin/processor/strategy/add/",
        {
            "name": "tw",
            "kind": "throwaway",
            "params": '{"threshold": 0}',
            "enabled": "on",
        },
    )
    assert response.status_code == 200
    assert b"threshold: Ensure this value is greater than or equal to 1." in response.content
    response = admin_client.post(
        "/admin/processor/strategy/add/",
        {
            "name": "tw",
            "kind": "throwaway",
            "params": '{"threshold": "3"}',
            "enabled": "on",
        },
    )
    assert response.status_code == 302
    assert Strategy.objects.get(name="tw").params == {"threshold": 3}


def test_the_live_processor_runs_it_and_refuses_it_once_unregistered(throwaway: type) -> None:
    Strategy.objects.create(name="tw", kind="throwaway", params={"threshold": 2})
    desired = desired_strategies()
    assert [(spec.kind, spec.params) for spec in desired.specs] == [("throwaway", {"threshold": 2})]
    unregister_strategy("throwaway")
    assert desired_strategies().rejected == {"tw": "no plug-in for kind 'throwaway'"}


def test_the_backtest_runs_it_with_the_same_lookup(tmp_path, throwaway: type) -> None:
    ticks = tmp_path / "ticks.csv"
    ticks.write_text("ts_ms,symbol,price,volume\n1700000000000,X,10.25,1\n")
    out = io.StringIO()
    call_command(
        "backtest",
        "--strategy",
        "throwaway",
        "--params",
        '{"threshold": 1}',
        "--ticks",
        str(ticks),
        stdout=out,
        stderr=io.StringIO(),
    )
    [line] = [json.loads(text) for text in out.getvalue().splitlines()]
    assert line["values"] == {"price": "10.25"}


def test_a_kind_missing_a_declaration_or_named_twice_is_refused() -> None:
    class NoForm(Throwaway):
        params_form = None  # type: ignore[assignment]

    class Other(Throwaway):
        kind = "ema"

    class TooLong(Throwaway):
        kind = "x" * 41

    with pytest.raises(TypeError, match="params_form"):
        register_strategy(NoForm)
    with pytest.raises(TypeError, match="kind"):
        register_strategy(TooLong)
    with pytest.raises(ValueError, match="registered twice"):
        register_strategy(Other)
    assert STRATEGIES["ema"].__name__ == "EmaCrossover"
