"""The live sink conflates outputs: each push and each store takes the latest output of every key that has new ones."""

from __future__ import annotations

from typing import Any

from processor.outputs import OutputBatch
from processor.publishing import LiveStrategyEvents
from processor.signals import SignalHub


class NoLayer:
    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        raise AssertionError("these tests take the messages themselves")


async def no_persist(*, signals: Any, outputs: Any) -> None:
    raise AssertionError("these tests take the store batches themselves")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def batch(strategy_id: int, symbol: str, first_seq: int, *closes: float) -> OutputBatch:
    rows = [(i, i, close, close) for i, close in enumerate(closes)]
    return OutputBatch(strategy_id, f"s{strategy_id}", "ema", "sim", symbol, "exec", ("fast", "slow"), first_seq, rows)


def pushed(events: LiveStrategyEvents) -> list[tuple[int, str, float]]:
    messages = [m for m in events.take_push_messages() if m["type"] == "strategy.output"]
    return [(row["strategy_id"], row["venue_symbol"], row["values"]["fast"]) for m in messages for row in m["outputs"]]


def test_each_push_takes_the_latest_output_of_the_keys_with_new_ones_in_key_order() -> None:
    events = LiveStrategyEvents(hub=SignalHub(), layer=NoLayer(), persist=no_persist)
    events.outputs(batch(2, "ETH", 0, 1.0, 2.0))
    events.outputs(batch(1, "BTC", 0, 3.0))
    events.outputs(batch(1, "BTC", 1, 4.0, 5.0))
    assert pushed(events) == [(1, "BTC", 5.0), (2, "ETH", 2.0)]
    assert pushed(events) == []  # nothing new since
    events.outputs(batch(2, "ETH", 2, 6.0))
    assert pushed(events) == [(2, "ETH", 6.0)]


def test_outputs_are_stored_once_per_interval_with_the_keys_changed_since_the_last_store() -> None:
    clock = Clock()
    events = LiveStrategyEvents(
        hub=SignalHub(), layer=NoLayer(), persist=no_persist, output_persist_interval_s=5.0, clock=clock
    )
    events.outputs(batch(1, "BTC", 0, 1.0))
    events.outputs(batch(2, "ETH", 0, 2.0))
    _, outputs = events.take_store_batch()
    assert [(o.strategy_id, o.values["fast"]) for o in outputs] == [(1, 1.0), (2, 2.0)]
    events.outputs(batch(1, "BTC", 1, 3.0))
    clock.now += 1
    assert events.take_store_batch() == ([], [])  # within the interval
    clock.now += 5
    _, outputs = events.take_store_batch()
    assert [(o.strategy_id, o.values["fast"]) for o in outputs] == [(1, 3.0)]
    assert events.take_store_batch(force_outputs=True) == ([], [])  # nothing new to force
    events.outputs(batch(2, "ETH", 1, 4.0))
    _, outputs = events.take_store_batch(force_outputs=True)
    assert [(o.strategy_id, o.values["fast"]) for o in outputs] == [(2, 4.0)]
    # Pushing is tracked apart from storing: the browsers have not seen any of it yet.
    assert pushed(events) == [(1, "BTC", 3.0), (2, "ETH", 4.0)]
