"""Checkpoint state, window planning and recovery invariants."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feeds.market import MarketData
from feeds.streams.consistency import TradeRejected, TradeStreamConsistencyController, TradeStreamStateStore
from feeds.streams.gap_recovery import (
    KnownHoleSpan,
    RuntimeRecoveryCoordinator,
    RuntimeRecoveryProtocol,
    TradeRecoveryController,
    ns_to_ms,
)
from feeds.streams.window_planner import TradeRecoveryWindow, TradeRecoveryWindowPlanner
from tests.feeds.doubles import ListHistory
from tests.feeds.factories import trade


def _controller(window: int = 50_000) -> TradeStreamConsistencyController:
    return TradeStreamConsistencyController(TradeStreamStateStore(dedup_window=window))


# --- state -----------------------------------------------------------------------------


def test_checkpoint_is_the_last_accepted_trade_and_agrees_with_its_id() -> None:
    consistency = _controller()
    for trade_id in (1, 2, 3):
        assert consistency.accept(trade(trade_id)) is not None
    state = consistency.store.get("BTCUSDT")
    assert state is not None
    assert state.last_trade == trade(3)
    assert state.last_trade_id == state.last_trade.trade_id == "3"
    assert state.last_trade.symbol == state.symbol


def test_duplicate_does_not_move_the_checkpoint() -> None:
    consistency = _controller()
    consistency.accept(trade(5))
    consistency.accept(trade(6))
    assert consistency.accept(trade(5)) is None
    assert consistency.accept(trade(6)) is None
    assert consistency.store.get("BTCUSDT").last_trade_id == "6"  # type: ignore[union-attr]
    assert consistency.stats.duplicates == 2


def test_rejected_trade_does_not_move_the_checkpoint() -> None:
    consistency = _controller()
    consistency.accept(trade(1))
    with pytest.raises(TradeRejected):
        consistency.accept(trade(2, price=0))
    assert consistency.store.get("BTCUSDT").last_trade_id == "1"  # type: ignore[union-attr]
    assert consistency.accept(trade(2)) is not None


def test_trade_older_than_the_checkpoint_is_dropped_even_after_leaving_the_window() -> None:
    consistency = _controller(window=2)
    for trade_id in (10, 11, 12, 13):
        consistency.accept(trade(trade_id))
    assert not consistency.store.get("BTCUSDT").has_seen("10")  # type: ignore[union-attr]
    assert consistency.accept(trade(10)) is None
    assert consistency.store.get("BTCUSDT").last_trade_id == "13"  # type: ignore[union-attr]


def test_symbols_have_independent_checkpoints() -> None:
    consistency = _controller()
    consistency.accept(trade(100))
    assert consistency.accept(trade(1, symbol="ETHUSDT")) is not None
    assert consistency.store.get("BTCUSDT").last_trade_id == "100"  # type: ignore[union-attr]


def test_no_state_exists_before_a_trade_is_accepted() -> None:
    assert _controller().store.get("BTCUSDT") is None


# --- planning --------------------------------------------------------------------------


@settings(deadline=None, max_examples=200)
@given(
    start=st.integers(min_value=0, max_value=2_000_000_000_000),
    length=st.integers(min_value=0, max_value=30 * 3_600_000),
    max_window=st.integers(min_value=100_000, max_value=3_599_999),
)
def test_windows_are_valid_bounded_contiguous_and_cover_the_range(start: int, length: int, max_window: int) -> None:
    windows = TradeRecoveryWindowPlanner(max_window).build_windows("BTCUSDT", start, start + length)
    if length == 0:
        assert windows == ()
        return
    assert windows[0].start_time == start and windows[-1].end_time == start + length
    for window in windows:
        assert 0 < window.end_time - window.start_time <= max_window
    for before, after in zip(windows, windows[1:]):
        assert before.end_time == after.start_time  # shared boundary, no gap


def test_default_window_is_below_binance_one_hour_limit() -> None:
    windows = TradeRecoveryWindowPlanner().build_windows("BTCUSDT", 0, 7_200_000)
    assert [w.end_time - w.start_time for w in windows] == [3_599_999, 3_599_999, 2]


def test_equal_bounds_give_an_empty_plan() -> None:
    assert TradeRecoveryWindowPlanner().build_windows("BTCUSDT", 5, 5) == ()


@pytest.mark.parametrize("start,end", [(-1, 5), (10, 9)])
def test_planner_rejects_an_invalid_range_before_building(start: int, end: int) -> None:
    with pytest.raises(ValueError):
        TradeRecoveryWindowPlanner().build_windows("BTCUSDT", start, end)


def test_window_is_validated_on_creation() -> None:
    with pytest.raises(ValueError):
        TradeRecoveryWindow("BTCUSDT", 10, 9)


# --- recovery --------------------------------------------------------------------------

BASE_MS = 1_764_460_800_000


def _coordinator(
    history: ListHistory,
    consistency: TradeStreamConsistencyController,
    *,
    max_window: int = 1000,
    retention_ms: int | None = None,
) -> RuntimeRecoveryCoordinator:
    return RuntimeRecoveryCoordinator(
        consistency.store,
        TradeRecoveryWindowPlanner(max_window),
        TradeRecoveryController(history, consistency),
        retention_ms=retention_ms,
    )


async def test_recovery_without_a_checkpoint_is_empty_and_creates_no_state() -> None:
    consistency = _controller()
    history = ListHistory([trade(1)])
    result = await _coordinator(history, consistency).recover("BTCUSDT", BASE_MS + 10)
    assert result.recovered_trades == () and result.requested_start_time == result.requested_end_time == BASE_MS + 10
    assert consistency.store.get("BTCUSDT") is None and history.windows == []


async def test_recovery_runs_windows_in_order_and_aggregates_within_the_requested_bounds() -> None:
    consistency = _controller()
    consistency.accept(trade(1, ts_ms=BASE_MS))
    # Trades every 250 ms; the one on each 1000 ms boundary is returned by two windows.
    history = ListHistory([trade(i, ts_ms=BASE_MS + 250 * (i - 1)) for i in range(1, 22)])
    result = await _coordinator(history, consistency).recover("BTCUSDT", BASE_MS + 5000)
    assert [(w.start_time - BASE_MS, w.end_time - BASE_MS) for w in history.windows] == [
        (0, 1000),
        (1000, 2000),
        (2000, 3000),
        (3000, 4000),
        (4000, 5000),
    ]
    assert [t.trade_id for t in result.recovered_trades] == [str(i) for i in range(2, 22)]
    assert (result.requested_start_time, result.requested_end_time) == (BASE_MS, BASE_MS + 5000)
    assert consistency.store.get("BTCUSDT").last_trade_id == "21"  # type: ignore[union-attr]


async def test_recovered_trades_keep_their_identity() -> None:
    consistency = _controller()
    consistency.accept(trade(1))
    originals = [trade(2), trade(3)]
    history = ListHistory(originals)
    result = await _coordinator(history, consistency).recover("BTCUSDT", BASE_MS + 10)
    assert all(a is b for a, b in zip(result.recovered_trades, originals))


async def test_recovery_errors_pass_through_unchanged() -> None:
    consistency = _controller()
    consistency.accept(trade(1))
    history = ListHistory([])
    history.error = ConnectionResetError("REST down")
    with pytest.raises(ConnectionResetError, match="REST down"):
        await _coordinator(history, consistency).recover("BTCUSDT", BASE_MS + 10)
    assert consistency.store.get("BTCUSDT").last_trade_id == "1"  # type: ignore[union-attr]


async def test_checkpoint_older_than_retention_reports_a_known_hole_and_recovers_the_rest() -> None:
    consistency = _controller()
    consistency.accept(trade(1, ts_ms=BASE_MS))
    history = ListHistory([trade(2, ts_ms=BASE_MS + 4000), trade(3, ts_ms=BASE_MS + 9000)])
    result = await _coordinator(history, consistency, retention_ms=3000).recover("BTCUSDT", BASE_MS + 10_000)
    assert result.hole == KnownHoleSpan("BTCUSDT", BASE_MS, BASE_MS + 7000)
    assert [t.trade_id for t in result.recovered_trades] == ["3"]


def test_unix_millisecond_conversion_is_integer_and_deterministic() -> None:
    moment = datetime(2026, 11, 30, 0, 0, 0, 123456, tzinfo=UTC)
    ns = int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
    assert ns_to_ms(ns) == 1_795_996_800_123
    assert ns_to_ms(1_795_996_800_123_999_999) == 1_795_996_800_123


def test_coordinator_satisfies_the_runtime_recovery_protocol() -> None:
    assert isinstance(_coordinator(ListHistory([]), _controller()), RuntimeRecoveryProtocol)


def test_tiny_windows_still_cover_the_range_exactly() -> None:
    windows = TradeRecoveryWindowPlanner(1).build_windows("BTCUSDT", 10, 15)
    assert [(w.start_time, w.end_time) for w in windows] == [(10, 11), (11, 12), (12, 13), (13, 14), (14, 15)]


def test_non_numeric_ids_are_deduplicated_within_the_bounded_window() -> None:
    consistency = _controller(window=2)

    def hex_trade(trade_id: str) -> MarketData:
        return dataclasses.replace(trade(1), trade_id=trade_id)

    assert consistency.accept(hex_trade("5c9dcf41a")) is not None
    assert consistency.accept(hex_trade("5c9dcf41a")) is None
    assert consistency.accept(hex_trade("0a9dcf41b")) is not None
    assert consistency.accept(hex_trade("ff9dcf41c")) is not None
    # The first id has left the two-id window: it is no longer recognised.
    assert consistency.accept(hex_trade("5c9dcf41a")) is not None
    assert consistency.stats.duplicates == 1


async def test_a_symbol_without_checkpoint_is_recovered_from_the_given_start_and_state_comes_from_acceptance() -> None:
    consistency = _controller()
    history = ListHistory([trade(1, ts_ms=BASE_MS + 100), trade(2, ts_ms=BASE_MS + 200)])
    coordinator = _coordinator(history, consistency)
    result = await coordinator.recover("BTCUSDT", BASE_MS + 500, start_if_no_checkpoint=BASE_MS)
    assert [t.trade_id for t in result.recovered_trades] == ["1", "2"]
    assert consistency.store.get("BTCUSDT").last_trade_id == "2"  # type: ignore[union-attr]
    empty = await coordinator.recover("ETHUSDT", BASE_MS + 500, start_if_no_checkpoint=BASE_MS + 500)
    assert empty.recovered_trades == () and consistency.store.get("ETHUSDT") is None
