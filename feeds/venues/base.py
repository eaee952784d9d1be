"""The one interface every venue adapter implements.

An adapter declares its venue (settings it accepts, channels it serves), opens a frame
source for a set of symbols, and parses frames with a pure function: no I/O, no state,
so a recorded frame always yields the same events.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import AsyncIterator, Mapping, Protocol, Sequence

from feeds.market import MarketData


class ParseError(ValueError):
    """A frame the adapter cannot turn into events; `reason` is a short metric label."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class InstrumentSpec:
    """What a frame source needs to know of one subscribed instrument."""

    venue_symbol: str
    tick_size: str
    lot_size: str


@dataclass(frozen=True)
class FeedSpec:
    """A feed as the runtime runs it: validated settings and its subscribed instruments."""

    name: str
    venue: str
    settings: Mapping[str, object]
    instruments: Sequence[InstrumentSpec] = field(default_factory=tuple)


class FrameSource(Protocol):
    """A live source of raw frames; batches are the frames available at one moment."""

    def batches(self) -> AsyncIterator[list[bytes]]: ...


class Venue(Protocol):
    name: str
    channels: frozenset[str]

    def clean_settings(self, settings: Mapping[str, object]) -> dict[str, object]:
        """Return validated settings with defaults filled in; raise ValidationError per key."""
        ...

    def open(self, feed: FeedSpec) -> FrameSource:
        """Return a frame source for `feed`; nothing connects until it is iterated."""
        ...

    def parse(self, frame: bytes, received_ns: int) -> list[MarketData]:
        """Return the events in `frame`; raise ParseError for a malformed frame."""
        ...
