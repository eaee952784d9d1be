"""The Redis key layout; the same string is the key and the pub/sub channel.

    {prefix}:{VENUE}:{MARKET_TYPE}:{SYMBOL}:{channel}   trades, mark_price, funding, ticker,
                                                        book_ticker, metadata, health
    {prefix}:{VENUE}:venue:{subject}                    health, ratelimit

Redis keeps keys and channels in separate namespaces, so one name serves both: a reader
GETs the last value and SUBSCRIBEs to the same name for pushes.

Pub/sub channels are server-wide (the database number does not apply to them), so the
prefix carries the deployment's Redis namespace: `md` on database 0, `md.db4` on
database 4, `md.<REDIS_NAMESPACE>` when set. Two deployments on one server then never
hear each other's messages.
"""

from __future__ import annotations

from dataclasses import dataclass

VENUE_SCOPE = "venue"
# Channels derived from market events; `metadata` and `health` are published beside them.
METADATA_CHANNEL = "metadata"
HEALTH_CHANNEL = "health"
RATELIMIT_SUBJECT = "ratelimit"  # venue-wide: the REST budget of the fallback polls


class KeyLayoutError(ValueError):
    """A key part that would break the layout (empty, or containing the separator)."""


def _part(name: str, value: str) -> str:
    if not value or ":" in value or any(ch.isspace() for ch in value):
        raise KeyLayoutError(f"{name} {value!r} must be non-empty, without ':' or spaces")
    return value


def namespaced_prefix(prefix: str, namespace: str) -> str:
    """Return the first key part for `prefix` in the deployment's Redis `namespace`."""
    return f"{prefix}.{namespace}" if namespace else prefix


def stream_key(prefix: str, venue: str, market_type: str, symbol: str, channel: str) -> str:
    """Return the key of one instrument channel."""
    if market_type == VENUE_SCOPE:
        raise KeyLayoutError(f"market type {VENUE_SCOPE!r} is reserved for venue-wide keys")
    return ":".join(
        (
            _part("prefix", prefix),
            _part("venue", venue),
            _part("market type", market_type),
            _part("symbol", symbol),
            _part("channel", channel),
        )
    )


def venue_key(prefix: str, venue: str, subject: str) -> str:
    """Return the key of a venue-wide subject (its health)."""
    return ":".join((_part("prefix", prefix), _part("venue", venue), VENUE_SCOPE, _part("subject", subject)))


@dataclass(frozen=True)
class ParsedKey:
    prefix: str
    venue: str
    market_type: str  # VENUE_SCOPE for venue-wide keys
    symbol: str | None  # None for venue-wide keys
    channel: str  # the subject for venue-wide keys


def parse_key(key: str) -> ParsedKey | None:
    """Return the parts of a key in this layout, or None for any other key."""
    parts = key.split(":")
    if len(parts) == 4 and parts[2] == VENUE_SCOPE:
        return ParsedKey(parts[0], parts[1], VENUE_SCOPE, None, parts[3])
    if len(parts) == 5 and parts[2] != VENUE_SCOPE and all(parts):
        return ParsedKey(parts[0], parts[1], parts[2], parts[3], parts[4])
    return None
