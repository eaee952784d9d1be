"""The feed runtime's metadata gate: no socket, no subscription, no trade before metadata.

A price at unknown precision, with no contract multiplier, is a number a strategy would
size an order from and get wrong. So an instrument of a venue that lists its metadata
(Binance exchangeInfo, KuCoin contracts, bitFlyer markets, Upstox instruments) is
streamed only once that listing confirmed its tick size, lot size and multiplier, and
only while the confirmation is younger than `metadata_max_age_s()`. A venue without a
metadata endpoint (simulated, replay) is described by the site's own Instrument rows,
which are known by construction.

The confirmation lives on the Instrument row (`metadata_refreshed_at`), written only by
`feeds.distribution.redispub.metadata.listing_apply`: at startup here, by the hourly
`refresh-instrument-metadata` job (in this process or in Celery), and by the Redis
publisher. This gate reads the rows back, so a refresh done by another process lifts
or sets the gate here too. Trade plans read the same rows (`metadata_missing_reason`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.utils import timezone
from prometheus_client import Counter, Gauge

from core.health import HealthBoard, Status
from feeds.distribution.redispub.metadata import (
    FETCH_FAILURES,
    fetch_listing,
    listing_apply,
    listing_failed,
    metadata_max_age_s,
    venue_lists_metadata,
)
from feeds.models import Instrument
from feeds.venues.base import FeedSpec, InstrumentMeta

log = logging.getLogger(__name__)

GATED_INSTRUMENTS = Gauge(
    "feed_metadata_gated_instruments",
    "Subscribed instruments held back because their metadata is not known",
    ["feed"],
    multiprocess_mode="livesum",
)
GATE_CHANGES = Counter(
    "feed_metadata_gate_changes_total",
    "Instruments the metadata gate held back or let through",
    ["feed", "change"],
)


def health_component(feed: str) -> str:
    return f"metadata-gate:{feed}"


def metadata_missing_reason(
    *,
    lists_metadata: bool,
    refreshed_at: datetime | None,
    problem: str,
    now: datetime,
    max_age_s: float,
) -> str | None:
    """Return why an instrument's metadata is not known, or None when it is."""
    if not lists_metadata:
        return None
    if refreshed_at is None:
        return problem or "not fetched from the venue yet"
    age_s = (now - refreshed_at).total_seconds()
    if age_s > max_age_s:
        stale = f"last confirmed by the venue {age_s:.0f} s ago (good for {max_age_s:.0f} s)"
        return f"{stale}; {problem}" if problem else stale
    return None


def instruments_missing_metadata(
    feed_name: str,
    venue_name: str,
    venue_symbols: Collection[str],
    *,
    now: datetime | None = None,
) -> dict[str, str]:
    """Return the named instruments whose metadata is not known, with why (one query)."""
    lists = venue_lists_metadata(venue_name)
    if not lists:
        return {}
    now = now or timezone.now()
    max_age_s = metadata_max_age_s()
    rows = Instrument.objects.filter(feed__name=feed_name, venue_symbol__in=list(venue_symbols)).values_list(
        "venue_symbol", "metadata_refreshed_at", "metadata_problem"
    )
    found: dict[str, str] = {}
    missing: dict[str, str] = {}
    for venue_symbol, refreshed_at, problem in rows:
        found[venue_symbol] = venue_symbol
        reason = metadata_missing_reason(
            lists_metadata=True, refreshed_at=refreshed_at, problem=problem, now=now, max_age_s=max_age_s
        )
        if reason is not None:
            missing[venue_symbol] = reason
    for venue_symbol in venue_symbols:
        if venue_symbol not in found:
            missing[venue_symbol] = "no instrument row"
    return missing


@dataclass(frozen=True)
class GateChange:
    """What one check changed: instruments let through, and instruments held back."""

    admitted: tuple[str, ...] = ()
    held: tuple[str, ...] = ()


# Told after every check (what changed, possibly nothing), with the feed's full held map
# (venue symbol -> why), so a follower can retry what it could not do last time.
GateListener = Callable[[str, GateChange, Mapping[str, str]], Awaitable[None]]


class InstrumentMetadataGate:
    """Which subscribed instruments of each feed may be dialled and traded.

    One writer of its state (the startup task and the feed's watcher call `check`);
    read by the startup that builds streams. Its state is on health, one component per
    feed, whose reason lists the held instruments and why, and in the
    `feed_metadata_gated_instruments` gauge.
    """

    def __init__(
        self,
        health: HealthBoard,
        *,
        timeout_s: float = 10.0,
        retry_s: float = 5.0,
        max_retry_s: float = 300.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._health = health
        self._timeout_s = timeout_s
        self._retry_s = retry_s
        self._max_retry_s = max_retry_s
        self._monotonic = monotonic
        # Failed fetches in a row, and when the venue may be asked again (doubling waits:
        # a listing that is down, or too big for the timeout, is not fetched in a loop).
        self._failures: dict[str, int] = {}
        self._next_fetch: dict[str, float] = {}
        self._held: dict[str, dict[str, str]] = {}  # feed -> venue symbol -> why
        self._known: dict[str, set[str]] = {}  # feed -> venue symbols with known metadata
        self._listeners: list[GateListener] = []

    def add_listener(self, listener: GateListener) -> None:
        """Call `listener` after every check (the Redis publisher follows the gate)."""
        self._listeners.append(listener)

    async def follow(self, listener: GateListener) -> None:
        """`add_listener`, then tell `listener` what every check so far decided.

        A follower that attaches after the first check (the startup tasks of one phase
        run concurrently) still hears of every instrument the gate let through.
        """
        self._listeners.append(listener)
        for feed, known in list(self._known.items()):
            await listener(feed, GateChange(admitted=tuple(sorted(known))), self.held(feed))

    def allows(self, feed: str, venue_symbol: str) -> bool:
        return venue_symbol in self._known.get(feed, set())

    def held(self, feed: str) -> dict[str, str]:
        return dict(self._held.get(feed, {}))

    def admitted_spec(self, spec: FeedSpec) -> FeedSpec:
        """Return `spec` narrowed to its instruments with known metadata."""
        known = self._known.get(spec.name, set())
        return replace(spec, instruments=tuple(i for i in spec.instruments if i.venue_symbol in known))

    async def check(self, spec: FeedSpec, *, fetch: bool) -> GateChange:
        """Fetch the feed's metadata from the venue (when `fetch`), then re-read what is known.

        A failed fetch is recorded on the rows and changes nothing else: metadata the
        venue confirmed recently stays good until it is too old. A database that cannot
        be read keeps the last state (nothing newly let through), said on health.
        """
        try:
            return await self._check(spec, fetch=fetch)
        except DatabaseError as exc:
            if spec.name not in self._known:
                raise  # at startup: no state to keep, the runtime cannot start
            log.warning("metadata gate %s: check failed: %r", spec.name, exc)
            self._health.set(
                health_component(spec.name),
                Status.DEGRADED,
                f"metadata check failed ({exc!r}); keeping the last state: {self._held_text(spec.name)}"[:500],
            )
            return GateChange()

    async def _check(self, spec: FeedSpec, *, fetch: bool) -> GateChange:
        symbols = [instrument.venue_symbol for instrument in spec.instruments]
        due = self._monotonic() >= self._next_fetch.get(spec.name, float("-inf"))
        if fetch and due and venue_lists_metadata(spec.venue):
            listing: list[InstrumentMeta] | None = None
            try:
                listing = await fetch_listing(spec.venue, spec.settings, timeout_s=self._timeout_s)
            except FETCH_FAILURES as exc:
                failures = self._failures[spec.name] = self._failures.get(spec.name, 0) + 1
                wait_s = min(self._retry_s * 2 ** (failures - 1), self._max_retry_s)
                self._next_fetch[spec.name] = self._monotonic() + wait_s
                log.warning(
                    "metadata gate %s: fetch failed (%d in a row; next in %.1f s): %r", spec.name, failures, wait_s, exc
                )
                await database_sync_to_async(listing_failed)(
                    feed_name=spec.name, venue_symbols=symbols, reason=f"fetch failed: {exc!r}"
                )
            else:
                self._failures.pop(spec.name, None)
                self._next_fetch.pop(spec.name, None)
            if listing is not None:
                await database_sync_to_async(listing_apply)(
                    feed_name=spec.name, venue_name=spec.venue, venue_symbols=symbols, listing=listing
                )
        missing = await database_sync_to_async(instruments_missing_metadata)(spec.name, spec.venue, symbols)
        change = self._update(spec.name, symbols, missing)
        for listener in list(self._listeners):
            try:
                await listener(spec.name, change, dict(missing))
            except Exception:  # a follower's failure must not stop the gate (or the feed)
                log.exception("metadata gate %s: listener %r failed", spec.name, listener)
        return change

    def _update(self, feed: str, symbols: list[str], missing: dict[str, str]) -> GateChange:
        before = self._known.get(feed)
        known = {symbol for symbol in symbols if symbol not in missing}
        self._known[feed] = known
        self._held[feed] = dict(missing)
        if before is None:
            admitted, held = tuple(sorted(known)), tuple(sorted(missing))
        else:
            admitted, held = tuple(sorted(known - before)), tuple(sorted(before - known))
        for symbol in admitted:
            GATE_CHANGES.labels(feed, "admitted").inc()
            log.info("metadata gate %s: %s has metadata; it is streamed and traded", feed, symbol)
        for symbol in held:
            GATE_CHANGES.labels(feed, "held").inc()
            log.warning("metadata gate %s: holding %s: %s", feed, symbol, missing[symbol])
        GATED_INSTRUMENTS.labels(feed).set(len(missing))
        self._report(feed, len(known))
        return GateChange(admitted, held)

    def _held_text(self, feed: str) -> str:
        held = self._held.get(feed, {})
        if not held:
            return "none held"
        return f"held for metadata ({len(held)}): " + "; ".join(
            f"{symbol}: {why}" for symbol, why in sorted(held.items())
        )

    def _report(self, feed: str, known: int) -> None:
        if not self._held[feed]:
            self._health.set(health_component(feed), Status.HEALTHY, f"metadata known for {known} instrument(s)")
            return
        # No instrument to stream at all blocks the feed; some held degrades it.
        status = Status.BLOCKED if known == 0 else Status.DEGRADED
        self._health.set(health_component(feed), status, self._held_text(feed)[:500])
