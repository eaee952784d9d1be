"""Celery beat's scheduler: the database schedule, sent by one beat at a time, each send expiring.

django-celery-beat's DatabaseScheduler keeps the entries and their last runs in the
database, so beat has no local state file and can move hosts. On top of it:

- One sender: every tick first takes or renews the `celery-beat` lease (core.leases).
  A beat that does not hold it is a standby: it sends nothing, logs who holds it,
  and takes over once the holder releases it (clean stop) or it expires (a killed
  holder stops renewing). On taking over it re-reads the entries' last runs, which
  the holder saves after every send.
- Expiring sends: a message carries `expires` = the entry's interval (for a crontab,
  the time to its next run), unless the row sets its own expiry. After a worker outage
  the queued backlog expires instead of running back to back; the next due send runs.
- The rows are seeded from the declared jobs when missing (tradingsite.beat_seed).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery.schedules import schedule as interval_schedule
from django.conf import settings
from django.db import DatabaseError, InterfaceError, close_old_connections
from django_celery_beat.schedulers import DatabaseScheduler

from core.health import Status
from core.leases import describe_this_process, lease_holder, new_lease_owner, release_lease, take_lease
from tradingsite import celery_health
from tradingsite.beat_seed import seed_schedule

log = logging.getLogger(__name__)

BEAT_LEASE = "celery-beat"
# A standby repeats "who holds it" this often (and at once when the holder changes).
STANDBY_LOG_EVERY_S = 60.0


def send_expiry_s(entry_schedule: Any, now: Any) -> float | None:
    """Seconds a send of this schedule stays worth running: until the next send is due."""
    if isinstance(entry_schedule, interval_schedule):
        seconds = float(entry_schedule.run_every.total_seconds())
    else:
        try:  # crontab and solar: the time to the next run after this one
            seconds = float(entry_schedule.remaining_estimate(now).total_seconds())
        except Exception:  # a one-off (clocked) or custom schedule: no natural expiry
            return None
    return seconds if seconds > 0 else None


class LeasedDatabaseScheduler(DatabaseScheduler):
    """DatabaseScheduler that sends only while it holds the beat lease."""

    max_interval: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lease_owner = new_lease_owner()
        self.lease_holder_text = describe_this_process("celery beat")
        self.lease_ttl_s = float(settings.BEAT_LEASE_TTL_S)
        self.holding = False
        self._standby_said: tuple[str, float] = ("", 0.0)
        self._busy = 0
        super().__init__(*args, **kwargs)
        # Renew well inside the TTL: beat sleeps at most max_interval between ticks.
        self.max_interval = min(float(self.max_interval), self.lease_ttl_s / 3)

    def setup_schedule(self) -> None:
        seed_schedule()
        super().setup_schedule()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        self._busy += 1
        try:
            if not self._hold_lease():
                return self.max_interval
            return float(super().tick(*args, **kwargs))
        finally:
            self._busy -= 1

    def _do_sync(self) -> None:
        self._busy += 1
        try:
            super()._do_sync()
        finally:
            self._busy -= 1

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any) -> Any:
        if "expires" not in entry.options:
            expires = send_expiry_s(entry.schedule, self.app.now())
            if expires is not None:
                entry.options = {**entry.options, "expires": expires}
        return super().apply_async(entry, producer=producer, advance=advance, **kwargs)

    def close(self) -> None:
        # Beat's SIGTERM handler closes the scheduler from inside whatever the main thread
        # was doing; in the middle of a database call that would wait on the connection's
        # own lock forever. The handler then raises SystemExit, and beat closes the
        # scheduler again once the call has unwound: the work is done then.
        if self._busy:
            return
        try:
            super().close()
        finally:
            celery_health.stop("beat")
            if self.holding:
                self.holding = False
                try:
                    release_lease(BEAT_LEASE, owner=self.lease_owner)
                    log.info("beat: released the beat lease")
                except (DatabaseError, InterfaceError) as exc:  # it expires on its own
                    log.warning(
                        "beat: could not release the beat lease (%r); it expires in %.0fs", exc, self.lease_ttl_s
                    )

    def _hold_lease(self) -> bool:
        try:
            close_old_connections()
            held = take_lease(BEAT_LEASE, owner=self.lease_owner, ttl_s=self.lease_ttl_s, holder=self.lease_holder_text)
        except (DatabaseError, InterfaceError) as exc:
            # Unable to renew: a standby may take over at the expiry, so stop sending now.
            held = False
            log.warning("beat: cannot reach the database for the beat lease (%r): not sending", exc)
        if held:
            celery_health.beat_says(Status.HEALTHY, f"sending: holds the beat lease as {self.lease_holder_text}")
        if held and not self.holding:
            log.info("beat: holding the beat lease as %s: sending", self.lease_holder_text)
            # Another beat may have sent since this one last read the entries: re-read them.
            self._initial_read = True
            self._heap = None
        elif not held and self.holding:
            log.warning("beat: lost the beat lease: standby, not sending")
        self.holding = held
        if not held:
            self._say_standby()
        return held

    def _say_standby(self) -> None:
        try:
            current = lease_holder(BEAT_LEASE)
        except (DatabaseError, InterfaceError):
            return
        holder = current.holder if current is not None else ""
        celery_health.beat_says(Status.HEALTHY, f"standby: the beat lease is held by {holder or 'nobody'}")
        said, at = self._standby_said
        now = time.monotonic()
        if holder != said or now - at >= STANDBY_LOG_EVERY_S:
            until = f" until {current.expires_at:%H:%M:%S}" if current is not None else ""
            log.info("beat: standby, the beat lease is held by %s%s", holder or "nobody", until)
            self._standby_said = (holder, now)
