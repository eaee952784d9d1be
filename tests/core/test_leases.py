"""Named leases: one holder site-wide, renewed by its owner, taken over once expired."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from core.leases import lease_holder, release_lease, take_lease

pytestmark = pytest.mark.django_db(transaction=True)
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def at(seconds: float):  # type: ignore[no-untyped-def]
    return lambda: T0 + timedelta(seconds=seconds)


def test_a_lease_is_exclusive_until_released_or_expired() -> None:
    assert take_lease("feed:sim", owner="a", ttl_s=10, holder="runfeed pid 1", now=at(0))
    assert not take_lease("feed:sim", owner="b", ttl_s=10, holder="runfeed pid 2", now=at(5))
    assert take_lease("feed:other", owner="b", ttl_s=10, now=at(5))  # another name is another lease
    assert take_lease("feed:sim", owner="a", ttl_s=10, holder="runfeed pid 1", now=at(9))  # renewal
    held = lease_holder("feed:sim")
    assert held is not None
    assert (held.owner, held.holder, held.acquired_at) == ("a", "runfeed pid 1", T0)  # renewal keeps acquired_at
    assert held.expires_at == T0 + timedelta(seconds=19)
    assert not take_lease("feed:sim", owner="b", ttl_s=10, now=at(18))
    assert take_lease("feed:sim", owner="b", ttl_s=10, holder="runfeed pid 2", now=at(20))  # a's expired
    assert lease_holder("feed:sim").acquired_at == T0 + timedelta(seconds=20)  # type: ignore[union-attr]
    assert not release_lease("feed:sim", owner="a")  # owner-checked
    assert release_lease("feed:sim", owner="b", now=at(21))
    assert not lease_holder("feed:sim").live(T0 + timedelta(seconds=21))  # type: ignore[union-attr]
    assert take_lease("feed:sim", owner="c", ttl_s=10, now=at(21))
    assert lease_holder("never") is None


@pytest.mark.needs_postgres
def test_two_processes_racing_for_a_free_lease_never_both_win() -> None:
    """Many takers at once on a real server: exactly one holds each round."""
    for round_no in range(20):
        name = f"race:{round_no}"
        barrier = threading.Barrier(6)
        winners: list[str] = []

        def taker(owner: str, name: str = name, barrier: threading.Barrier = barrier) -> None:
            try:
                barrier.wait()
                if take_lease(name, owner=owner, ttl_s=30):
                    winners.append(owner)
            finally:
                connection.close()

        threads = [threading.Thread(target=taker, args=(f"o{i}",)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(winners) == 1, winners
        assert lease_holder(name).owner == winners[0]  # type: ignore[union-attr]
