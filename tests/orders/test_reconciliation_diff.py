"""The pure reconciliation diff: every kind of mismatch becomes the right correction."""

from __future__ import annotations

from orders.brokers.base import BrokerFill, BrokerOrder
from orders.models.lifecycle import OrderStatus
from orders.reconciliation import (
    Abandon,
    Adopt,
    ApplyFill,
    CancelForeign,
    LocalOrder,
    LocalState,
    MissingAtBroker,
    UpdateStatus,
    VenueReport,
    diff,
)


def _order(cid: str, status: OrderStatus, *, xid: str = "", filled: int = 0) -> BrokerOrder:
    return BrokerOrder(cid, xid or f"X{cid}", "BTCUSDT", "BUY", "LIMIT", 100, 5, status, filled)


def _fill(tid: str, xid: str, qty: int) -> BrokerFill:
    return BrokerFill(tid, xid, "BTCUSDT", "BUY", qty, 5, 0, 1)


def _local(**overrides: object) -> LocalState:
    base: dict[str, object] = dict(
        account_id=7,
        prefix="ts-7-",
        pending_intents=(),
        working=(),
        known_trade_ids=frozenset(),
        known_client_ids=frozenset(),
    )
    base.update(overrides)
    return LocalState(**base)  # type: ignore[arg-type]


def test_an_intent_the_broker_has_is_adopted_and_one_it_never_had_is_abandoned() -> None:
    local = _local(pending_intents=("ts-7-a", "ts-7-b"), known_client_ids=frozenset({"ts-7-a", "ts-7-b"}))
    venue = VenueReport((), {"ts-7-a": _order("ts-7-a", OrderStatus.SUBMITTED), "ts-7-b": None}, ())
    assert diff(local, venue) == [Adopt(_order("ts-7-a", OrderStatus.SUBMITTED)), Abandon("ts-7-b")]


def test_missed_fills_come_before_the_cancel_that_releases_the_rest() -> None:
    working = (LocalOrder("ts-7-a", "Xts-7-a", OrderStatus.SUBMITTED, 0),)
    canceled = _order("ts-7-a", OrderStatus.CANCELED, filled=40)
    venue = VenueReport((), {"ts-7-a": canceled}, (_fill("t1", "Xts-7-a", 30), _fill("t2", "Xts-7-a", 10)))
    corrections = diff(_local(working=working, known_client_ids=frozenset({"ts-7-a"})), venue)
    assert corrections == [
        ApplyFill(_fill("t1", "Xts-7-a", 30)),
        ApplyFill(_fill("t2", "Xts-7-a", 10)),
        UpdateStatus(canceled),
    ]


def test_an_ended_order_with_fills_still_missing_waits_instead_of_releasing() -> None:
    working = (LocalOrder("ts-7-a", "Xts-7-a", OrderStatus.SUBMITTED, 0),)
    canceled = _order("ts-7-a", OrderStatus.CANCELED, filled=40)
    venue = VenueReport((), {"ts-7-a": canceled}, (_fill("t1", "Xts-7-a", 30),))
    assert diff(_local(working=working), venue) == [ApplyFill(_fill("t1", "Xts-7-a", 30))]


def test_fills_already_applied_and_fills_of_other_orders_are_ignored() -> None:
    working = (LocalOrder("ts-7-a", "Xts-7-a", OrderStatus.PARTIALLY_FILLED, 30),)
    open_order = _order("ts-7-a", OrderStatus.PARTIALLY_FILLED, filled=30)
    venue = VenueReport((open_order,), {}, (_fill("t1", "Xts-7-a", 30), _fill("t9", "Xsomeone-else", 5)))
    assert diff(_local(working=working, known_trade_ids=frozenset({"t1"})), venue) == []


def test_an_order_with_our_prefix_and_no_intent_is_canceled_and_others_are_left_alone() -> None:
    ours, theirs, other_account = (
        _order("ts-7-zz", OrderStatus.SUBMITTED),
        _order("manual-1", OrderStatus.SUBMITTED),
        _order("ts-8-q", OrderStatus.SUBMITTED),
    )
    assert diff(_local(), VenueReport((ours, theirs, other_account), {}, ())) == [CancelForeign(ours)]


def test_a_working_order_the_broker_never_had_is_reported_not_guessed() -> None:
    working = (LocalOrder("ts-7-a", "Xts-7-a", OrderStatus.SUBMITTED, 0),)
    assert diff(_local(working=working), VenueReport((), {"ts-7-a": None}, ())) == [MissingAtBroker("ts-7-a")]


def test_an_acknowledged_order_seen_working_moves_to_submitted() -> None:
    working = (LocalOrder("ts-7-a", "Xts-7-a", OrderStatus.NEW, 0),)
    report = _order("ts-7-a", OrderStatus.SUBMITTED)
    assert diff(_local(working=working), VenueReport((report,), {}, ())) == [UpdateStatus(report)]
