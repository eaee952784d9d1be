"""Feed ownership: a feed runs in exactly one process, the holder of its lease.

A runfeed process takes the lease `feed:NAME` of each feed it runs (core.leases: one row
per name, an owner token, an expiry) before anything of the feed starts. A second
process for a held feed waits as a hot standby: it says who holds the feed and until
when, polls every `poll_s`, and takes the feed over once the holder releases its lease
(a clean stop) or lets it expire (the holder was killed, paused or cut off from the
database). It then starts the feed from the persisted checkpoints, so gap recovery (or,
for the simulated venue, the resumed tape) fills in what the holder had not recorded.

The holder renews every `renew_s`, well inside `ttl_s`. Each successful renewal makes the
lease good until its start plus `ttl_s` on this process's monotonic clock, which is never
later than the expiry the database holds (written after that start). When renewals keep
failing, the keeper stops the process one renewal interval before that point, and
`valid()` (the recorder's write fence) turns false at it: once a standby may have taken
the feed over, this process writes nothing more. The expiry is written from the
taker's wall clock, so hosts must keep their clocks in step (NTP) to well inside the TTL.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from core.leases import LeaseHolder, lease_holder, new_lease_owner, release_lease, take_lease
from core.runtime.core import FatalError

log = logging.getLogger(__name__)


def feed_lease_name(feed: str) -> str:
    return f"feed:{feed}"


@dataclass(frozen=True)
class FeedLeaseSettings:
    ttl_s: float
    renew_s: float
    poll_s: float

    def __post_init__(self) -> None:
        if not 0 < self.renew_s * 2 <= self.ttl_s or self.poll_s <= 0:
            raise ValueError(
                f"feed lease: need 0 < 2 x renew ({self.renew_s}s) <= TTL ({self.ttl_s}s) and a positive poll"
            )


def feed_lease_settings() -> FeedLeaseSettings:
    """FEED_LEASE_TTL_S, FEED_LEASE_RENEW_S and FEED_LEASE_POLL_S (tradingsite/settings/feeds.py)."""
    return FeedLeaseSettings(
        ttl_s=settings.FEED_LEASE_TTL_S, renew_s=settings.FEED_LEASE_RENEW_S, poll_s=settings.FEED_LEASE_POLL_S
    )


class LeaseLost(FatalError):
    """This process no longer holds its feed: it stops, and a standby takes the feed over."""


class FeedLeaseStore:
    """The lease rows through core.leases, off the event loop (a database thread)."""

    def __init__(self, now: Callable[[], datetime] = timezone.now) -> None:
        self._now = now

    async def take(self, name: str, *, owner: str, ttl_s: float, holder: str) -> bool:
        return await database_sync_to_async(take_lease)(name, owner=owner, ttl_s=ttl_s, holder=holder, now=self._now)

    async def release(self, name: str, *, owner: str) -> bool:
        return await database_sync_to_async(release_lease)(name, owner=owner, now=self._now)

    async def holder(self, name: str) -> LeaseHolder | None:
        return await database_sync_to_async(lease_holder)(name)


class FeedLeases:
    """The leases of the feeds one process runs: it holds all of them or none."""

    def __init__(
        self,
        feeds: Sequence[str],
        *,
        holder: str,
        lease_settings: FeedLeaseSettings,
        store: FeedLeaseStore | None = None,
        owner: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        # Sorted: two processes after overlapping sets take them in one order.
        self.names = sorted(feed_lease_name(feed) for feed in feeds)
        self.holder = holder
        self.owner = owner or new_lease_owner()
        self.settings = lease_settings
        self._store = store or FeedLeaseStore()
        self._clock = clock
        self._sleep = sleep
        self._good_until = -math.inf  # monotonic
        self.standby_reason = ""  # who holds the feed while this process waits; "" once held
        self.renewals = 0

    def valid(self) -> bool:
        """Whether this process still holds its feeds for sure (the recorder's write fence)."""
        return self._clock() < self._good_until

    async def _take_all(self) -> bool:
        taken: list[str] = []
        for name in self.names:
            if not await self._store.take(name, owner=self.owner, ttl_s=self.settings.ttl_s, holder=self.holder):
                for mine in taken:  # all or none: a standby holding half would starve the other
                    await self._store.release(mine, owner=self.owner)
                return False
            taken.append(name)
        return True

    async def _other_holders(self) -> tuple[tuple[str, ...], str]:
        """(the other owners, as a key that changes with the holder; who holds what until when)."""
        owners: list[str] = []
        parts: list[str] = []
        for name in self.names:
            held = await self._store.holder(name)
            if held is not None and held.owner and held.owner != self.owner:
                owners.append(held.owner)
                parts.append(
                    f"{name} is held by {held.holder or 'an unnamed process'} "
                    f"until {held.expires_at.isoformat(timespec='milliseconds')}"
                )
        return tuple(owners), "; ".join(parts) or "a lease was taken by another process meanwhile"

    async def wait_until_held(self, *, report: Callable[[str], None] = lambda text: None) -> None:
        """Take every lease, waiting as a standby while another process holds one.

        `report` is told who holds the feed, and until when, whenever the holder changes
        (the expiry moves on with every renewal and is not reported each time).
        """
        reported: tuple[str, ...] | None = None
        while True:
            started = self._clock()
            try:
                if await self._take_all():
                    self._good_until = started + self.settings.ttl_s
                    if reported is not None:
                        report(f"took over {', '.join(self.names)} (was: {self.standby_reason})")
                    self.standby_reason = ""
                    return
                owners, holders = await self._other_holders()
            except Exception as exc:  # the database may come back; a standby waits for it
                owners, holders = ("?",), f"lease unreadable: {exc}"
            self.standby_reason = holders
            if owners != reported:
                report(f"standby: {holders}; polling every {self.settings.poll_s}s")
                reported = owners
            await self._sleep(self.settings.poll_s)

    async def keep(self) -> None:
        """Renew every `renew_s` for as long as the process runs; raise LeaseLost when the
        lease is gone or would expire before the next renewal."""
        while True:
            await self._sleep(self.settings.renew_s)
            started = self._clock()
            if started >= self._good_until:
                raise LeaseLost(
                    f"{', '.join(self.names)}: the lease expired before it was renewed "
                    "(the process was paused or the database was out of reach); stopping so the standby runs the feed"
                )
            try:
                renewed = await asyncio.wait_for(self._take_all(), timeout=self.settings.renew_s)
            except Exception as exc:  # a timeout or a database error: try again while the lease lasts
                left = self._good_until - self._clock()
                if left <= self.settings.renew_s:
                    raise LeaseLost(
                        f"{', '.join(self.names)}: could not renew the lease ({exc!r}) and it expires in "
                        f"{max(left, 0):.1f}s; stopping before a standby may take the feed over"
                    ) from None
                log.warning("feed lease: renewal failed (%r); the lease holds for %.1fs more", exc, left)
                continue
            if not renewed:
                self._good_until = -math.inf
                raise LeaseLost(f"{', '.join(self.names)}: {(await self._other_holders())[1]}; stopping")
            self._good_until = started + self.settings.ttl_s
            self.renewals += 1

    async def release(self) -> None:
        """Give every lease back (a clean stop): a standby takes the feeds over at once."""
        self._good_until = -math.inf
        for name in self.names:
            try:
                await self._store.release(name, owner=self.owner)
            except Exception as exc:  # it expires on its own then
                log.warning("feed lease: could not release %s (%r); it expires at its TTL", name, exc)
