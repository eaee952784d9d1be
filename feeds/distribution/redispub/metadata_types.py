"""Instrument metadata as published: exact decimal strings, and where they came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from feeds.distribution.redispub.envelope import Source


@dataclass(frozen=True)
class InstrumentMetadata:
    symbol: str
    venue_symbol: str
    tick_size: str
    lot_size: str
    contract_multiplier: str
    source: Source  # REST (the venue's listing) or CONFIG (the site's instrument table)
    min_quantity: str | None = None
    venue_status: str | None = None  # the venue's status word ("trading")

    def data(self) -> dict[str, Any]:
        """Return the `metadata` channel payload (absent fields left out)."""
        data: dict[str, Any] = {
            "tick_size": self.tick_size,
            "lot_size": self.lot_size,
            "contract_multiplier": self.contract_multiplier,
        }
        if self.min_quantity is not None:
            data["min_quantity"] = self.min_quantity
        if self.venue_status is not None:
            data["venue_status"] = self.venue_status
        return data
