"""The recorder's address of one (feed, venue symbol): the row ids its ticks are written under."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TickAddress:
    """Where ticks of one (feed, venue symbol) go."""

    instrument_id: int
    feed_id: int
