"""The per-browser outbox: conflated, ordered where it must be, bounded, acknowledged."""

from __future__ import annotations

from typing import Any

from dashboard.conflation import BrowserOutbox


def price(symbol: str, value: str) -> dict[str, Any]:
    return {"feed": "sim", "symbol": symbol, "price": value, "open": "1", "volume": "1", "ticks": 1, "ts_ms": 0}


def output(strategy_id: int, symbol: str, fast: float) -> dict[str, Any]:
    return {
        "strategy_id": strategy_id,
        "strategy": f"s{strategy_id}",
        "feed": "sim",
        "symbol": symbol,
        "venue_symbol": symbol,
        "time_ms": 0,
        "occurrence_time_ms": 0,
        "values": {"fast": fast},
    }


def signal(strategy_id: int, output_id: str) -> dict[str, Any]:
    return {
        "strategy_id": strategy_id,
        "strategy": f"s{strategy_id}",
        "feed": "sim",
        "symbol": "BTC",
        "kind": "ENTRY_LONG",
        "price": "1",
        "output_id": output_id,
    }


def outbox(**options: Any) -> BrowserOutbox:
    return BrowserOutbox(
        interval_s=options.pop("interval_s", 0.25), max_unacked=options.pop("max_unacked", 3), **options
    )


def test_many_price_pushes_become_one_row_per_instrument_per_interval() -> None:
    box = outbox()
    for n in range(100):
        box.offer({"type": "market.prices", "prices": [price("BTC", f"{n}"), price("ETH", f"{n}.5")]})
    (batch,) = box.take(now=10.0)
    assert batch["type"] == "prices"
    assert [(row["symbol"], row["price"]) for row in batch["prices"]] == [("BTC", "99"), ("ETH", "99.5")]
    assert box.stats.rows_conflated == 198

    box.offer({"type": "market.prices", "prices": [price("BTC", "100")]})
    assert box.take(now=10.1) == []  # inside the interval: nothing yet
    assert abs(box.wait_s(now=10.1) - 0.15) < 1e-9
    (later,) = box.take(now=10.25)
    assert later["prices"] == [price("BTC", "100")]


def test_signals_and_app_events_are_never_conflated_and_keep_their_order() -> None:
    box = outbox()
    box.offer({"type": "strategy.signal", "signals": [signal(1, "a")]})
    box.offer({"type": "orders.trade", "event": "order", "client_order_id": "ts-1"})
    box.offer({"type": "strategy.signal", "signals": [signal(1, "b")]})
    box.offer({"type": "strategy.output", "outputs": [output(1, "BTC", 1.0), output(1, "BTC", 2.0)]})
    batch = box.take(now=0.0)
    assert [m["type"] for m in batch] == ["strategy.signal", "orders.trade", "strategy.signal", "strategy.output"]
    assert [m["signals"][0]["output_id"] for m in batch if m["type"] == "strategy.signal"] == ["a", "b"]
    assert batch[3]["outputs"] == [output(1, "BTC", 2.0)]
    assert {m["seq"] for m in batch} == {1}


def test_rows_of_strategies_the_user_cannot_see_are_dropped() -> None:
    box = outbox(visible_strategies=frozenset({1}))
    box.offer({"type": "strategy.output", "outputs": [output(1, "BTC", 1.0), output(2, "BTC", 1.0)]})
    box.offer({"type": "strategy.signal", "signals": [signal(2, "hidden")]})
    (batch,) = box.take(now=0.0)
    assert [row["strategy_id"] for row in batch["outputs"]] == [1]
    assert box.stats.rows_filtered == 2


def test_a_browser_that_stops_acknowledging_is_stalled_and_an_ack_revives_it() -> None:
    box = outbox(max_unacked=3, interval_s=1.0)
    for n in range(3):
        box.offer({"type": "market.prices", "prices": [price("BTC", str(n))]})
        assert box.take(now=float(n))
    box.offer({"type": "market.prices", "prices": [price("BTC", "3")]})
    assert box.stalled
    assert box.take(now=10.0) == []
    box.ack(2)
    assert not box.stalled
    (batch,) = box.take(now=10.0)
    assert batch["seq"] == 4


def test_acks_out_of_range_are_ignored() -> None:
    box = outbox(max_unacked=1)
    box.offer({"type": "market.prices", "prices": [price("BTC", "1")]})
    box.take(now=0.0)
    box.ack(99)  # never sent
    assert box.stalled
    box.ack(1)
    assert not box.stalled


def test_the_ordered_queue_is_bounded_and_overflow_stalls_the_browser() -> None:
    box = outbox(max_ordered=5)
    for n in range(6):
        box.offer({"type": "orders.trade", "n": n})
    assert box.stalled
