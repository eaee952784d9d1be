"""Periodic jobs of the feeds app."""

from __future__ import annotations

from core.jobs import periodic_job
from feeds.distribution.redispub import metadata


@periodic_job("refresh-instrument-metadata", every_s=3600.0)
def instrument_metadata_refresh() -> str:
    return metadata.instrument_metadata_refresh()
