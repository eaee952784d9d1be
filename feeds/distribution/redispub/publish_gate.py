"""The metadata gate: no market data for an instrument until its metadata is known.

A price at unknown precision, with no contract multiplier, is a number a consumer would
size an order from and get wrong; holding it back is the safer failure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from feeds.distribution.redispub.metadata_types import InstrumentMetadata


class PublishGate:
    """Instruments whose metadata has landed, per feed; one writer (the metadata loader)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], InstrumentMetadata] = {}
        # Why a feed's gate is still closed ("metadata unavailable: HTTP 503 ..."), for health.
        self.blocked_reason: dict[str, str] = {}
        self.held_back: Counter[str] = Counter()  # events dropped at the gate, per feed

    def allows(self, feed: str, venue_symbol: str) -> bool:
        return (feed, venue_symbol) in self._known

    def admit(self, feed: str, metadata: Iterable[InstrumentMetadata]) -> None:
        for item in metadata:
            self._known[(feed, item.venue_symbol)] = item
        self.blocked_reason.pop(feed, None)

    def block(self, feed: str, reason: str) -> None:
        """Record why `feed`'s metadata is not known yet (instruments already admitted stay so)."""
        self.blocked_reason[feed] = reason

    def withdraw(self, feed: str, venue_symbols: Iterable[str], reason: str) -> None:
        """Close the gate again for instruments whose metadata is no longer known."""
        for venue_symbol in venue_symbols:
            self._known.pop((feed, venue_symbol), None)
        self.blocked_reason[feed] = reason

    def metadata(self, feed: str, venue_symbol: str) -> InstrumentMetadata | None:
        return self._known.get((feed, venue_symbol))
