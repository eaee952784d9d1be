"""Instrument metadata: fetched from the venue, stored on Instrument rows, published.

Used the same way by the feed runtime's metadata gate (feeds.distribution.metadata_gate: no socket,
no subscription and no trade for an instrument before this lands), by the Redis
publisher's gate (no market data published before it), and by the hourly
`refresh-instrument-metadata` job, which republishes the whole set every cycle: venues publish no change feed, and a
reader that missed the one message announcing a tick change would never hear of it
again. A venue without a metadata endpoint (the simulated one) is described by the
site's own Instrument rows, published with source CONFIG.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

import aiohttp
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from redis.asyncio import Redis

from core.health import Status
from feeds.distribution.redispub.catalog import (
    CadencePolicy,
    Catalog,
    FeedEntry,
    catalog_feeds,
    parse_cadence_overrides,
)
from feeds.distribution.redispub.envelope import Envelope, Source
from feeds.distribution.redispub.keys import METADATA_CHANNEL, namespaced_prefix
from feeds.distribution.redispub.metadata_types import InstrumentMetadata
from feeds.distribution.redispub.publisher import Draft, KeySequences, RedisPublisher
from feeds.models import Feed, Instrument
from feeds.venues import get_venue
from feeds.venues.base import InstrumentMeta, ParseError
from feeds.venues.rest import RestError, fetch_instruments

log = logging.getLogger(__name__)

# What a failed metadata fetch can raise: an HTTP error, a timeout, a refused
# connection, or a body the venue module cannot read.
FETCH_FAILURES = (RestError, aiohttp.ClientError, asyncio.TimeoutError, ParseError, OSError)


@dataclass
class MetadataResult:
    """One feed's metadata after a fetch: what is known, what the venue does not list."""

    feed: str
    known: list[InstrumentMetadata] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # venue symbols the venue did not list
    changed: list[str] = field(default_factory=list)  # "BTC-USDT tick_size 0.1 -> 0.01"


def _text(value: Decimal | str) -> str:
    return format(Decimal(value).normalize(), "f")


def venue_lists_metadata(venue_name: str) -> bool:
    """True when the venue has a metadata endpoint; otherwise the site's own rows are the metadata."""
    return hasattr(get_venue(venue_name), "instruments_request")


async def fetch_listing(
    venue_name: str,
    venue_settings: Mapping[str, object],
    *,
    session: aiohttp.ClientSession | None = None,
    timeout_s: float = 10.0,
) -> list[InstrumentMeta] | None:
    """Return the venue's instrument listing, or None when the venue has no metadata endpoint."""
    if not venue_lists_metadata(venue_name):
        return None
    venue = get_venue(venue_name)
    return await fetch_instruments(venue, venue_settings, session=session, timeout_s=timeout_s)  # type: ignore[arg-type]


async def fetch_feed_metadata(
    feed: FeedEntry,
    *,
    session: aiohttp.ClientSession | None = None,
    timeout_s: float = 10.0,
) -> list[InstrumentMeta] | None:
    """Return the venue's instrument listing, or None when the venue has no metadata endpoint."""
    return await fetch_listing(feed.venue, feed.settings, session=session, timeout_s=timeout_s)


def instrument_metadata_apply(*, feed: FeedEntry, listing: Sequence[InstrumentMeta] | None) -> MetadataResult:
    """Store the venue's tick size, lot size and multiplier on the feed's subscribed instruments."""
    return listing_apply(
        feed_name=feed.name, venue_name=feed.venue, venue_symbols=list(feed.instruments), listing=listing
    )


def listing_apply(
    *,
    feed_name: str,
    venue_name: str,
    venue_symbols: Collection[str],
    listing: Sequence[InstrumentMeta] | None,
    now: datetime | None = None,
) -> MetadataResult:
    """Store the venue's tick size, lot size and multiplier on the named instruments of a feed.

    Only changed numbers are written; each change is logged. Every listed instrument is
    stamped as confirmed now (the metadata gate opens for it); one the venue no longer
    lists loses its stamp (the gate closes for it). With no listing (a venue without a
    metadata endpoint) the rows themselves are the metadata. Locks the feed's instrument
    rows (select_for_update, in pk order) for the read-compare-write.
    """
    result = MetadataResult(feed_name)
    by_symbol = {meta.venue_symbol: meta for meta in listing} if listing is not None else {}
    now = now or timezone.now()
    with transaction.atomic():
        rows = (
            Instrument.objects.select_for_update()
            .filter(feed__name=feed_name, venue_symbol__in=list(venue_symbols))
            .order_by("pk")
        )
        for row in rows:
            if listing is None:
                result.known.append(_from_row(row, Source.CONFIG))
                continue
            meta = by_symbol.get(row.venue_symbol)
            if meta is None:
                result.missing.append(row.venue_symbol)
                Instrument.objects.filter(pk=row.pk).update(
                    metadata_refreshed_at=None, metadata_problem=f"not listed by {venue_name}"
                )
                continue
            updates: dict[str, Decimal] = {}
            for name, value in (
                ("tick_size", meta.tick_size),
                ("lot_size", meta.lot_size),
                ("contract_multiplier", meta.contract_multiplier),
            ):
                # bitFlyer publishes no tick size: keep the configured one.
                if value is not None and Decimal(value) != getattr(row, name):
                    result.changed.append(f"{row.symbol} {name} {_text(getattr(row, name))} -> {_text(value)}")
                    updates[name] = Decimal(value)
            Instrument.objects.filter(pk=row.pk).update(**updates, metadata_refreshed_at=now, metadata_problem="")
            for name, new_value in updates.items():
                setattr(row, name, new_value)
            result.known.append(_from_row(row, Source.REST, meta))
    for change in result.changed:
        log.warning("metadata %s: %s", feed_name, change)
    if result.missing:
        log.warning("metadata %s: venue does not list %s", feed_name, ", ".join(sorted(result.missing)))
    return result


def listing_failed(*, feed_name: str, venue_symbols: Collection[str], reason: str) -> None:
    """Record why a fetch of the feed's metadata failed.

    The confirmation stamp stays: metadata confirmed recently is still good until it is
    older than metadata_max_age_s(), and the gate closes then.
    """
    Instrument.objects.filter(feed__name=feed_name, venue_symbol__in=list(venue_symbols)).update(
        metadata_problem=reason[:300]
    )


def stored_metadata(*, feed_name: str, venue_symbols: Collection[str]) -> list[InstrumentMetadata]:
    """Return the stored metadata of instruments the venue's listing confirmed (source REST)."""
    rows = Instrument.objects.filter(feed__name=feed_name, venue_symbol__in=list(venue_symbols)).order_by("pk")
    return [_from_row(row, Source.REST) for row in rows]


def _from_row(row: Instrument, source: Source, meta: InstrumentMeta | None = None) -> InstrumentMetadata:
    return InstrumentMetadata(
        symbol=row.symbol,
        venue_symbol=row.venue_symbol,
        tick_size=_text(row.tick_size),
        lot_size=_text(row.lot_size),
        contract_multiplier=_text(row.contract_multiplier),
        source=source,
        min_quantity=_text(meta.min_quantity) if meta is not None and meta.min_quantity else None,
        venue_status=meta.status if meta is not None else None,
    )


def metadata_drafts(
    catalog: Catalog,
    feed: FeedEntry,
    known: Sequence[InstrumentMetadata],
    *,
    ttl_ms: int,
    recv_time_ns: int,
) -> list[Draft]:
    """Return one `metadata` message per instrument with known metadata."""
    drafts = []
    for item in known:
        instrument = feed.instruments.get(item.venue_symbol)
        if instrument is None:
            continue
        drafts.append(
            Draft(
                catalog.key(feed, instrument, METADATA_CHANNEL),
                ttl_ms,
                Envelope(
                    venue=feed.venue,
                    market_type=feed.market_type,
                    symbol=item.symbol,
                    venue_symbol=item.venue_symbol,
                    channel=METADATA_CHANNEL,
                    recv_time_ns=recv_time_ns,
                    source=item.source.value,
                    status=Status.HEALTHY.value,
                    data=item.data(),
                ),
            )
        )
    return drafts


def metadata_ttl_ms() -> int:
    """Metadata keys outlive a few missed hourly refreshes, then disappear (stale)."""
    from core.schedule import job_interval_s, job_named

    every_s = job_interval_s(job_named("refresh-instrument-metadata"))
    return round(every_s * settings.MARKET_DATA_TTL_MULTIPLIER * 1000)


def metadata_max_age_s() -> float:
    """How long a venue's confirmation of an instrument's metadata stays good.

    As long as the published metadata key lives: a few missed hourly refreshes.
    """
    return metadata_ttl_ms() / 1000


def catalog_from_settings(feeds: dict[str, FeedEntry]) -> Catalog:
    return Catalog(
        namespaced_prefix(settings.MARKET_DATA_PREFIX, settings.REDIS_NAMESPACE),
        feeds,
        CadencePolicy(settings.MARKET_DATA_TTL_MULTIPLIER, parse_cadence_overrides(settings.MARKET_DATA_CADENCE_S)),
    )


# A Celery worker is one publishing instance: its metadata messages carry this id and
# count on from one hourly run to the next, so a reader sees no false gap.
_JOB_INSTANCE_ID = uuid.uuid4().hex[:12]
_JOB_SEQUENCES = KeySequences()


class MetadataRefreshError(RuntimeError):
    """Some feeds' metadata could not be fetched; the others were refreshed."""


def instrument_metadata_refresh() -> str:
    """Refresh every enabled feed's instrument metadata and republish the whole set.

    Raises MetadataRefreshError after refreshing the feeds that worked when any failed,
    so the job's health shows the failure.
    """
    names = list(Feed.objects.filter(enabled=True).values_list("name", flat=True))
    feeds = catalog_feeds(names)
    results: list[MetadataResult] = []
    failures: list[str] = []
    for feed in feeds.values():
        if not feed.instruments:
            continue
        try:
            listing = async_to_sync(fetch_feed_metadata)(feed, timeout_s=settings.MARKET_DATA_REST_TIMEOUT_S)
        except FETCH_FAILURES as exc:
            log.warning("metadata %s: refresh failed: %r", feed.name, exc)
            failures.append(f"{feed.name}: {exc!r}"[:200])
            listing_failed(feed_name=feed.name, venue_symbols=list(feed.instruments), reason=f"fetch failed: {exc!r}")
            continue
        results.append(instrument_metadata_apply(feed=feed, listing=listing))
    published = 0
    if settings.REDIS_URL and results:
        published = async_to_sync(_publish_results)(catalog_from_settings(feeds), results)
    summary = (
        f"{sum(len(r.known) for r in results)} instruments refreshed, {published} published, "
        f"{sum(len(r.changed) for r in results)} changed, {sum(len(r.missing) for r in results)} unlisted"
    )
    if failures:
        raise MetadataRefreshError(f"{summary}; failed: {'; '.join(failures)}")
    return summary


async def _publish_results(catalog: Catalog, results: list[MetadataResult]) -> int:
    redis = Redis.from_url(settings.REDIS_URL)
    try:
        publisher = RedisPublisher(redis, instance_id=_JOB_INSTANCE_ID, sequences=_JOB_SEQUENCES)
        now, ttl_ms = time.time_ns(), metadata_ttl_ms()
        drafts = [
            draft
            for result in results
            for draft in metadata_drafts(
                catalog, catalog.feeds[result.feed], result.known, ttl_ms=ttl_ms, recv_time_ns=now
            )
        ]
        await publisher.publish(drafts)
        return len(drafts)
    finally:
        await redis.aclose()
