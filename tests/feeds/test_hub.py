"""The shared hub: each subscriber's own policy decides what falling behind costs."""

from __future__ import annotations

import pytest

from feeds.distribution.hub import FailFast, Hub, Shed


class Counted:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._label = ""

    def labels(self, subscriber: str) -> Counted:
        self._label = subscriber
        return self

    def inc(self) -> None:
        self.counts[self._label] = self.counts.get(self._label, 0) + 1


async def test_a_shedding_subscriber_loses_items_alone_and_is_told_each_one() -> None:
    counter = Counted()
    hub: Hub[int] = Hub(name="test", subscriber="consumer", unit="items", shed_counter=counter)
    shed: list[int] = []
    small = hub.add("small", Shed(2, shed.append))
    never = hub.add("never", FailFast(100))
    for item in range(5):
        hub.publish(item)
    assert [small.get_nowait() for _ in range(small.qsize())] == [0, 1]
    assert shed == [2, 3, 4] and hub.overflows == {"small": 3} and counter.counts == {"small": 3}
    assert [never.get_nowait() for _ in range(never.qsize())] == [0, 1, 2, 3, 4]
    assert hub.failure is None and not hub.failed.is_set()


async def test_a_fail_fast_subscriber_drops_nothing_and_fails_once_at_its_limit() -> None:
    hub: Hub[int] = Hub(name="test", subscriber="signal subscriber", unit="signals")
    queue = hub.add("executor", FailFast(3))
    hub.publish_all([1, 2])
    assert hub.failure is None
    hub.publish_all([3, 4])
    assert hub.failure == "signal subscriber executor is 4 signals behind (limit 3)" and hub.failed.is_set()
    hub.publish_all([5])
    assert hub.failure == "signal subscriber executor is 4 signals behind (limit 3)"
    assert queue.qsize() == 5 and hub.depths() == {"executor": 5}


async def test_names_are_unique_and_a_removed_subscriber_gets_nothing() -> None:
    hub: Hub[int] = Hub(name="test", subscriber="consumer", unit="items")
    queue = hub.add("a", Shed(10))
    with pytest.raises(ValueError, match="consumer 'a' is already subscribed"):
        hub.add("a", FailFast(1))
    hub.remove("a")
    hub.publish(1)
    assert queue.empty() and hub.depths() == {}
