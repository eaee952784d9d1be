"""/api/signals/: each signal carries what became of it on each of the caller's accounts."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from orders.models import Outcome, TradeSetting
from orders.outcomes import signal_outcome_record
from processor.models import Strategy
from processor.signals import SignalKind
from tests.orders.factories import Setup, logged_in, make_instrument, make_setup, make_signal, make_strategy
from tests.orders.factories import stored_signal as stored

pytestmark = pytest.mark.django_db


@dataclass
class Shared:
    """One strategy traded by alice's and bob's accounts; carol trades another strategy."""

    strategy: Strategy
    alice: Setup
    bob: Setup
    carol: Setup


@pytest.fixture
def shared() -> Shared:
    instrument = make_instrument()
    strategy = make_strategy("shared-ema")
    alice = make_setup(username="alice", strategy=strategy, instrument=instrument)
    bob = make_setup(username="bob", strategy=strategy, instrument=instrument)
    carol = make_setup(username="carol", instrument=instrument)
    return Shared(strategy, alice, bob, carol)


def signals_of(client: Client, query: str = "") -> dict[str, dict]:
    response = client.get(f"/api/signals/{query}")
    assert response.status_code == 200, response.content
    return {row["output_id"]: row for row in response.json()["results"]}


def test_a_signal_lists_its_outcome_on_each_of_the_callers_accounts_only(shared: Shared) -> None:
    entry = make_signal(shared.strategy, SignalKind.ENTRY_LONG)
    stored(entry)
    signal_outcome_record(
        signal=entry, account_id=shared.alice.account.pk, outcome=Outcome.PLACED, client_order_id="ts-1-abc"
    )
    signal_outcome_record(
        signal=entry,
        account_id=shared.bob.account.pk,
        outcome=Outcome.HALTED,
        reason="account kill switch engaged: lunch",
    )

    (alice_row,) = signals_of(logged_in(shared.alice)).values()
    (outcome,) = alice_row["outcomes"]
    assert outcome["account"] == shared.alice.account.pk
    assert (outcome["outcome"], outcome["outcome_label"], outcome["client_order_id"], outcome["traded"]) == (
        "placed",
        "Traded",
        "ts-1-abc",
        True,
    )
    assert outcome["decided_at"]
    assert alice_row["traded"] is True

    (bob_row,) = signals_of(logged_in(shared.bob)).values()
    (outcome,) = bob_row["outcomes"]
    assert outcome["account"] == shared.bob.account.pk
    assert (outcome["outcome"], outcome["reason"], outcome["traded"]) == (
        "halted",
        "account kill switch engaged: lunch",
        False,
    )
    assert bob_row["traded"] is False
    # Carol's accounts do not trade the strategy: she sees neither the signal nor its outcomes.
    assert signals_of(logged_in(shared.carol)) == {}
    detail = logged_in(shared.alice).get(f"/api/signals/{alice_row['id']}/").json()
    assert [o["account"] for o in detail["outcomes"]] == [shared.alice.account.pk]


def test_a_signal_that_reached_no_account_shows_its_outcome_to_everyone_who_sees_the_strategy(shared: Shared) -> None:
    TradeSetting.objects.filter(strategy=shared.strategy).update(enabled=False)
    unrouted = make_signal(shared.strategy, SignalKind.ENTRY_SHORT)
    stored(unrouted)
    signal_outcome_record(signal=unrouted, account_id=None, outcome=Outcome.NO_TRADE_SETTING)

    for setup in (shared.alice, shared.bob):
        (row,) = signals_of(logged_in(setup)).values()
        assert [(o["account"], o["outcome"], o["traded"]) for o in row["outcomes"]] == [
            (None, "no_trade_setting", False)
        ]
        assert row["traded"] is False
    assert signals_of(logged_in(shared.carol)) == {}


def test_a_reversal_keeps_the_exit_and_the_entry_outcomes_apart(shared: Shared) -> None:
    exit_ = make_signal(shared.strategy, SignalKind.EXIT_LONG)
    entry = dataclasses.replace(exit_, kind=SignalKind.ENTRY_SHORT)  # same tick, same output
    stored(exit_), stored(entry)
    account = shared.alice.account.pk
    signal_outcome_record(signal=exit_, account_id=account, outcome=Outcome.PLACED, client_order_id="ts-1-exit")
    signal_outcome_record(signal=entry, account_id=account, outcome=Outcome.WAITING_FOR_EXIT)

    response = logged_in(shared.alice).get("/api/signals/")
    by_kind = {row["kind"]: row for row in response.json()["results"]}
    assert [o["outcome"] for o in by_kind["EXIT_LONG"]["outcomes"]] == ["placed"]
    assert [o["outcome"] for o in by_kind["ENTRY_SHORT"]["outcomes"]] == ["waiting_for_exit"]
    assert by_kind["ENTRY_SHORT"]["traded"] is False


def test_a_signal_without_a_recorded_outcome_lists_none(shared: Shared) -> None:
    stored(make_signal(shared.strategy, SignalKind.ENTRY_LONG))
    (row,) = signals_of(logged_in(shared.alice)).values()
    assert row["outcomes"] == [] and row["traded"] is False


def test_signals_filter_by_the_callers_outcome(shared: Shared) -> None:
    traded, halted = (
        make_signal(shared.strategy, SignalKind.ENTRY_LONG),
        make_signal(shared.strategy, SignalKind.ENTRY_LONG),
    )
    stored(traded), stored(halted)
    signal_outcome_record(
        signal=traded, account_id=shared.alice.account.pk, outcome=Outcome.PLACED, client_order_id="ts-1-a"
    )
    signal_outcome_record(signal=halted, account_id=shared.alice.account.pk, outcome=Outcome.HALTED)
    # Bob's outcome on the halted signal is placed: it must not make alice's filter match it.
    signal_outcome_record(
        signal=halted, account_id=shared.bob.account.pk, outcome=Outcome.PLACED, client_order_id="ts-2-b"
    )

    alice = logged_in(shared.alice)
    assert set(signals_of(alice, "?outcome=placed")) == {traded.output_id}
    assert set(signals_of(alice, "?outcome=halted")) == {halted.output_id}
    assert set(signals_of(alice, "?outcome=insufficient_capital")) == set()
    assert set(signals_of(logged_in(shared.bob), "?outcome=placed")) == {halted.output_id}
    assert set(signals_of(alice, "?outcome=")) == {traded.output_id, halted.output_id}


@pytest.mark.parametrize("value", ["PLACED", "traded", "'; drop table", "x" * 500])
def test_an_unknown_outcome_filter_is_a_400_naming_the_field(shared: Shared, value: str) -> None:
    response = logged_in(shared.alice).get("/api/signals/", {"outcome": value})
    assert response.status_code == 400
    assert "outcome" in response.json()


def test_listing_signals_costs_the_same_queries_for_one_signal_or_many(
    shared: Shared, django_assert_num_queries
) -> None:
    alice = logged_in(shared.alice)

    def record(n: int) -> None:
        for _ in range(n):
            signal = make_signal(shared.strategy, SignalKind.ENTRY_LONG)
            stored(signal)
            signal_outcome_record(
                signal=signal,
                account_id=shared.alice.account.pk,
                outcome=Outcome.PLACED,
                client_order_id=f"ts-{signal.output_id}",
            )
            signal_outcome_record(signal=signal, account_id=shared.bob.account.pk, outcome=Outcome.HALTED)

    record(1)
    # session + user, visible strategies, count, page, outcomes of the page
    with django_assert_num_queries(6):
        assert len(alice.get("/api/signals/").json()["results"]) == 1
    record(20)
    with django_assert_num_queries(6):
        rows = alice.get("/api/signals/").json()["results"]
    assert len(rows) == 21 and all(len(row["outcomes"]) == 1 and row["traded"] for row in rows)
    with django_assert_num_queries(6):
        assert len(alice.get("/api/signals/?outcome=placed").json()["results"]) == 21


def test_the_schema_documents_signal_outcomes_and_the_filter(shared: Shared) -> None:
    response = logged_in(shared.alice).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    schema = json.loads(response.content)
    signal = schema["components"]["schemas"]["Signal"]["properties"]
    assert signal["traded"]["type"] == "boolean"
    outcome = schema["components"]["schemas"]["SignalOutcome"]["properties"]
    assert {"account", "outcome", "outcome_label", "reason", "client_order_id", "traded", "decided_at"} <= set(outcome)
    (param,) = [p for p in schema["paths"]["/api/signals/"]["get"]["parameters"] if p["name"] == "outcome"]
    assert set(param["schema"]["enum"]) == set(Outcome.values)


def test_the_schema_is_valid_openapi_without_warnings() -> None:
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null", stdout=StringIO(), stderr=StringIO()
    )
