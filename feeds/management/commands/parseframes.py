"""Parse recorded frames of one venue: one raw frame per stdin line, one JSON event per stdout line."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from feeds.venues import VENUES, get_venue
from feeds.venues.base import ParseError
from feeds.venues.frames import frame_from_line
from feeds.venues.records import event_record


def _stdin_lines() -> Iterable[bytes]:
    # Bytes, not text: a line that is not UTF-8 must reach the parser (and be refused
    # there with a reason) instead of stopping the read.
    stdin = sys.stdin
    buffer = getattr(stdin, "buffer", None)
    if buffer is not None:
        return buffer
    return (line.encode("utf-8", "surrogateescape") for line in stdin)


class Command(BaseCommand):
    help = (
        "Read one raw frame per line on stdin (binary venues such as upstox: base64) and write "
        "one JSON object per event. The input is one stream: per-stream state carries across "
        "lines. Malformed lines (not JSON, not UTF-8, nested too deep, numbers out of range) "
        "are reported on stderr with their reason and skipped; the rest is parsed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--venue", required=True, help=f"One of: {', '.join(sorted(VENUES))}.")

    def handle(self, *args: Any, venue: str, **options: Any) -> None:
        try:
            adapter = get_venue(venue)
        except LookupError as exc:
            raise CommandError(str(exc)) from None
        state = adapter.new_stream_state()
        for number, line in enumerate(_stdin_lines(), start=1):
            if not line.strip():
                continue
            try:
                events = state.apply(adapter.parse(frame_from_line(adapter, line), time.time_ns()))
                records = [orjson.dumps(event_record(venue, event)).decode() for event in events]
            except ParseError as exc:
                self.stderr.write(f"parseframes {venue}: line {number}: skipped ({exc})")
                continue
            except orjson.JSONEncodeError as exc:  # a value JSON cannot carry (an integer beyond 64 bits)
                self.stderr.write(f"parseframes {venue}: line {number}: skipped (unprintable: {exc})")
                continue
            for record in records:
                self.stdout.write(record)
