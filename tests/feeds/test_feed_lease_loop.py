"""The feed lease loop on a virtual clock: standby, takeover, renewal, release and fencing.

The leases are the real rows (core.leases through the database); time is virtual: every
sleep of the loops waits on VirtualClock, which the test moves on. Nothing here waits
for real time to pass.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime, timedelta

import pytest
from django.db import OperationalError

from core.leases import lease_holder
from feeds.market import FeedData
from feeds.recording.recorder import TickRecorder
from feeds.recording.tick_address import TickAddress
from feeds.streams.feed_lease import FeedLeases, FeedLeaseSettings, FeedLeaseStore, LeaseLost
from tests.feeds.factories import trade

pytestmark = pytest.mark.django_db(transaction=True)
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SETTINGS = FeedLeaseSettings(ttl_s=10, renew_s=3, poll_s=1)


class VirtualClock:
    """Monotonic and wall time that move only when the test says; sleeps wake in order."""

    def __init__(self) -> None:
        self.t = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self.t

    def now(self) -> datetime:
        return T0 + timedelta(seconds=self.t)

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.t + seconds, next(self._seq), future))
        await future

    async def _settle(self, tasks: list[asyncio.Task[object]]) -> None:
        """Wait until every task still running is asleep here (their database calls take real time)."""
        for _ in range(5000):
            asleep = sum(1 for _, _, future in self._sleepers if not future.done())
            if asleep >= sum(1 for task in tasks if not task.done()):
                return
            await asyncio.sleep(0.001)
        raise AssertionError("tasks did not settle")

    async def run_until(self, until: float, *tasks: asyncio.Task[object]) -> None:
        """Move time on to `until`, waking each sleeper at its deadline, in order."""
        while True:
            await self._settle(list(tasks))
            if not self._sleepers or self._sleepers[0][0] > until:
                self.t = until
                return
            deadline, _, future = heapq.heappop(self._sleepers)
            self.t = max(self.t, deadline)
            if not future.done():
                future.set_result(None)


class FlakyStore(FeedLeaseStore):
    """The real store, until the database is 'gone'."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(now=clock.now)
        self.down = False

    async def take(self, name: str, *, owner: str, ttl_s: float, holder: str) -> bool:
        if self.down:
            raise OperationalError("connection refused")
        return await super().take(name, owner=owner, ttl_s=ttl_s, holder=holder)


def leases(clock: VirtualClock, holder: str, feeds: tuple[str, ...] = ("sim",), store=None) -> FeedLeases:  # type: ignore[no-untyped-def]
    return FeedLeases(
        feeds,
        holder=holder,
        lease_settings=SETTINGS,
        store=store or FeedLeaseStore(now=clock.now),
        clock=clock.monotonic,
        sleep=clock.sleep,
    )


async def test_a_standby_reports_the_holder_and_takes_over_once_a_killed_holders_lease_expires() -> None:
    clock = VirtualClock()
    holder, standby = leases(clock, "runfeed A"), leases(clock, "runfeed B")
    await holder.wait_until_held()  # A then stops renewing: it was killed
    reports: list[tuple[float, str]] = []
    waiting = asyncio.create_task(standby.wait_until_held(report=lambda text: reports.append((clock.t, text))))
    await clock.run_until(9.5, waiting)
    assert not waiting.done()
    assert len(reports) == 1  # one report while the holder stays the same
    assert reports[0][1].startswith("standby: feed:sim is held by runfeed A until 2026-12-01T12:00:10.000")
    assert "runfeed A" in standby.standby_reason
    await clock.run_until(20, waiting)
    assert waiting.done()
    took_at, text = reports[-1]
    assert 10 < took_at <= 10 + SETTINGS.poll_s and text.startswith("took over feed:sim")
    row = await FeedLeaseStore(now=clock.now).holder("feed:sim")
    assert row is not None and row.owner == standby.owner and row.holder == "runfeed B"
    assert standby.valid() and not holder.valid()


async def test_a_renewing_holder_keeps_its_feed_and_a_clean_release_hands_it_over_at_once() -> None:
    clock = VirtualClock()
    holder, standby = leases(clock, "runfeed A"), leases(clock, "runfeed B")
    await holder.wait_until_held()
    keeping = asyncio.create_task(holder.keep())
    waiting = asyncio.create_task(standby.wait_until_held())
    await clock.run_until(60, keeping, waiting)
    assert not waiting.done() and holder.valid()
    assert holder.renewals == 20  # every 3 s
    keeping.cancel()
    await asyncio.gather(keeping, return_exceptions=True)
    await holder.release()  # SIGTERM: the runtime gives the lease back after its last flush
    assert not holder.valid()
    released_at = clock.t
    await clock.run_until(released_at + SETTINGS.poll_s, waiting)
    assert waiting.done()  # at the next poll, not after a TTL
    assert standby.valid()


async def test_a_holder_that_cannot_renew_stops_before_its_lease_expires_and_then_writes_nothing() -> None:
    clock = VirtualClock()
    store = FlakyStore(clock)
    holder = leases(clock, "runfeed A", store=store)
    await holder.wait_until_held()
    stopped_at: list[float] = []

    async def keep() -> None:
        try:
            await holder.keep()
        finally:
            stopped_at.append(clock.t)

    keeping = asyncio.create_task(keep())
    store.down = True  # the database goes away after the first take
    await clock.run_until(20, keeping)
    with pytest.raises(LeaseLost, match="could not renew"):
        keeping.result()
    # Renewals failed at 3 and 6; at 9 the next one (12) would come after the expiry (10).
    assert stopped_at == [9.0]
    clock.t = 9.5
    assert holder.valid()  # still ours until 10: the last flush may go out
    clock.t = 10.0
    assert not holder.valid()
    writer_calls: list[object] = []

    class Writer:
        def write(self, rows, checkpoints):  # type: ignore[no-untyped-def]
            writer_calls.append(rows)

    async def direct(write, rows, checkpoints):  # type: ignore[no-untyped-def]
        return write(rows, checkpoints)

    recorder = TickRecorder(
        Writer(), {("sim", "BTCUSDT"): TickAddress(1, 1)}, batch_size=1, run_sync=direct, may_write=holder.valid
    )
    recorder.offer(FeedData("sim", (trade(1),)))
    assert not await recorder.flush()
    await recorder.close()
    assert writer_calls == [] and recorder.stats.fenced == 1


async def test_a_paused_holder_finds_its_lease_expired_and_stops() -> None:
    clock = VirtualClock()
    holder, standby = leases(clock, "runfeed A"), leases(clock, "runfeed B")
    await holder.wait_until_held()
    keeping = asyncio.create_task(holder.keep())
    await clock.run_until(4, keeping)  # one renewal at 3: good until 13
    clock.t = 30.0  # SIGSTOP ... SIGCONT: the loop did not run meanwhile
    await standby.wait_until_held()  # the standby took the feed over meanwhile
    assert not holder.valid()
    await clock.run_until(31, keeping)
    with pytest.raises(LeaseLost, match="expired before it was renewed"):
        keeping.result()


async def test_a_holder_whose_lease_was_taken_stops_naming_the_new_holder() -> None:
    clock = VirtualClock()
    holder, standby = leases(clock, "runfeed A"), leases(clock, "runfeed B")
    await holder.wait_until_held()
    keeping = asyncio.create_task(holder.keep())
    clock.t = 11.0  # past the TTL without a renewal: B takes it, then A's renewal runs
    await standby.wait_until_held()
    holder._good_until = 100  # as if A's clock thought it still held it
    await clock.run_until(15, keeping)
    with pytest.raises(LeaseLost, match="held by runfeed B"):
        keeping.result()
    assert not holder.valid()


async def test_a_process_for_several_feeds_holds_all_or_none() -> None:
    clock = VirtualClock()
    first, both = leases(clock, "runfeed b", ("b",)), leases(clock, "runfeed a,b", ("b", "a"))
    await first.wait_until_held()
    waiting = asyncio.create_task(both.wait_until_held())
    await clock.run_until(5, waiting)
    assert not waiting.done()
    a = await FeedLeaseStore(now=clock.now).holder("feed:a")
    assert a is not None and not a.live(clock.now())  # taken and given back while b is held elsewhere
    await first.release()
    await clock.run_until(7, waiting)
    assert waiting.done() and both.names == ["feed:a", "feed:b"]


def test_lease_settings_need_a_renewal_well_inside_the_ttl() -> None:
    with pytest.raises(ValueError, match="renew"):
        FeedLeaseSettings(ttl_s=10, renew_s=6, poll_s=1)
    assert lease_holder("feed:none") is None
