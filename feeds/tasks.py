"""Periodic jobs of the feeds app (cadence in tradingsite.schedule)."""
from __future__ import annotations

from feeds.distribution.redispub import metadata
from core.jobs import periodic_job


@periodic_job("refresh-instrument-metadata")
def instrument_metadata_refresh() -> str:
    return metadata.instrument_metadata_refresh()
