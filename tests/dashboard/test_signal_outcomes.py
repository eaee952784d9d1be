"""The dashboard shows what became of each signal: the signal table, the chart's initial markers, the admin."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from orders.models import Outcome, SignalOutcome
from orders.outcomes import signal_outcome_record
from processor.signals import Signal, SignalKind
from tests.orders.factories import Setup, logged_in, make_instrument, make_setup, make_signal, make_strategy
from tests.orders.factories import stored_signal as stored

pytestmark = pytest.mark.django_db


@pytest.fixture
def traders() -> tuple[Setup, Setup, Signal, Signal]:
    """Alice and bob trade one strategy on the charted instrument; one signal traded, one halted on alice's account."""
    from feeds.models import Subscription

    instrument = make_instrument()
    Subscription.objects.get_or_create(instrument=instrument, channel="trades")
    strategy = make_strategy("shared-ema")
    strategy.instruments.add(instrument)
    alice = make_setup(username="alice", strategy=strategy, instrument=instrument)
    bob = make_setup(username="bob", strategy=strategy, instrument=instrument)
    traded, halted = make_signal(strategy, SignalKind.ENTRY_LONG), make_signal(strategy, SignalKind.ENTRY_SHORT)
    stored(traded), stored(halted)
    signal_outcome_record(
        signal=traded, account_id=alice.account.pk, outcome=Outcome.PLACED, client_order_id="ts-1-traded"
    )
    signal_outcome_record(
        signal=halted,
        account_id=alice.account.pk,
        outcome=Outcome.HALTED,
        reason="global kill switch engaged: maintenance",
    )
    signal_outcome_record(
        signal=traded, account_id=bob.account.pk, outcome=Outcome.INSUFFICIENT_CAPITAL, reason="needs 500, 20 available"
    )
    return alice, bob, traded, halted


def signal_row(html: str, signal: Signal) -> str:
    match = re.search(rf'<tr data-signal="{re.escape(signal.output_id)}" data-kind="{signal.kind}".*?</tr>', html, re.S)
    assert match, f"no row for {signal.output_id}"
    return match.group(0)


def test_the_signal_table_shows_each_outcome_with_its_order_and_reason(traders) -> None:
    alice, _, traded, halted = traders
    html = logged_in(alice).get("/").content.decode()
    traded_row, halted_row = signal_row(html, traded), signal_row(html, halted)
    assert 'class="outcome traded" data-outcome="placed"' in traded_row
    assert "Traded" in traded_row and '<code class="order-id">ts-1-traded</code>' in traded_row
    assert 'class="outcome not-traded" data-outcome="halted"' in halted_row
    assert 'title="main: global kill switch engaged: maintenance"' in halted_row
    # Bob's outcome on the same signal is his alone.
    assert "insufficient_capital" not in html and "needs 500" not in html


def test_another_user_sees_only_the_outcomes_of_their_own_accounts(traders) -> None:
    _, bob, traded, halted = traders
    html = logged_in(bob).get("/dashboard/panels/signals/").content.decode()
    assert 'data-outcome="insufficient_capital"' in signal_row(html, traded)
    assert "ts-1-traded" not in html and "maintenance" not in html
    assert 'class="outcome pending" data-outcome=""' in signal_row(html, halted)  # nothing recorded on bob's account


def test_the_page_carries_the_chart_markers_with_their_outcomes(traders) -> None:
    alice, bob, traded, halted = traders

    def chart_signals(client: Client) -> dict[str, dict]:
        html = client.get("/").content.decode()
        match = re.search(r'<script id="chart-signals" type="application/json">(.*?)</script>', html, re.S)
        assert match
        return {row["output_id"]: row for row in json.loads(match.group(1))}

    mine = chart_signals(logged_in(alice))
    assert list(mine) == [traded.output_id, halted.output_id]  # oldest first: the chart draws them in time order
    (placed,) = mine[traded.output_id]["outcomes"]
    assert (placed["outcome"], placed["traded"], placed["settled"], placed["client_order_id"]) == (
        "placed",
        True,
        True,
        "ts-1-traded",
    )
    (stopped,) = mine[halted.output_id]["outcomes"]
    assert (stopped["outcome"], stopped["traded"], stopped["settled"]) == ("halted", False, True)
    assert stopped["reason"] == "global kill switch engaged: maintenance" and stopped["account_name"] == "main"
    assert mine[traded.output_id]["symbol"] == "BTCUSDT" and mine[traded.output_id]["kind"] == "ENTRY_LONG"

    theirs = chart_signals(logged_in(bob))
    assert [o["outcome"] for o in theirs[traded.output_id]["outcomes"]] == ["insufficient_capital"]
    assert theirs[halted.output_id]["outcomes"] == []


def test_the_signal_panel_reads_outcomes_in_one_query_for_all_rows(traders, django_assert_num_queries) -> None:
    alice, *_ = traders
    from dashboard.panels import signals_panel

    user = alice.account.owner
    with django_assert_num_queries(3):  # visible strategies, signals, their outcomes
        rows = signals_panel(user)["signals"]
    assert sorted(len(row.visible_outcomes) for row in rows) == [1, 1]


def test_the_admin_lists_outcomes_read_only_and_scoped_to_the_staff_members_accounts(traders) -> None:
    alice, bob, traded, _ = traders
    user = bob.account.owner
    user.is_staff = True
    user.save()
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="orders"))
    client = logged_in(bob)
    listing = client.get("/admin/orders/signaloutcome/")
    assert listing.status_code == 200
    body = listing.content.decode()
    assert "needs 500" in body and "ts-1-traded" not in body and "maintenance" not in body
    # The account filter in the sidebar lists bob's account only.
    assert f"account__id__exact={bob.account.pk}" in body and f"account__id__exact={alice.account.pk}" not in body
    assert client.get("/admin/orders/signaloutcome/?outcome__exact=insufficient_capital").status_code == 200
    alices = SignalOutcome.objects.get(account=alice.account, output_id=traded.output_id)
    assert client.get(f"/admin/orders/signaloutcome/{alices.pk}/change/").status_code in (302, 404)
    bobs = SignalOutcome.objects.get(account=bob.account)
    detail = client.get(f"/admin/orders/signaloutcome/{bobs.pk}/change/")
    assert detail.status_code == 200 and 'name="_save"' not in detail.content.decode()
    assert client.post(f"/admin/orders/signaloutcome/{bobs.pk}/delete/", {"post": "yes"}).status_code == 403


def test_the_admin_shows_an_unrouted_outcome_to_staff_whose_accounts_trade_the_strategy(traders) -> None:
    _, bob, _, _ = traders
    outsider = make_setup(username="carol")
    unrouted = make_signal(bob.strategy, SignalKind.EXIT_LONG)
    signal_outcome_record(signal=unrouted, account_id=None, outcome=Outcome.NO_TRADE_SETTING)
    for setup, sees in ((bob, True), (outsider, False)):
        user = setup.account.owner
        user.is_staff = True
        user.save()
        user.user_permissions.set(Permission.objects.filter(content_type__app_label="orders"))
        body = logged_in(setup).get("/admin/orders/signaloutcome/?outcome__exact=no_trade_setting").content.decode()
        assert (unrouted.symbol in body and "0 signal outcomes" not in body) is sees, setup.account.owner.username
