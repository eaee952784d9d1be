"""Parse recorded frames of one venue: one raw frame per stdin line, one JSON event per stdout line."""
from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from feeds.venues import VENUES, get_venue
from feeds.venues.base import ParseError
from feeds.venues.frames import frame_from_line
from feeds.venues.records import event_record


class Command(BaseCommand):
    help = (
        "Read one raw frame per line on stdin (binary venues such as upstox: base64) and write "
        "one JSON object per event. The input is one stream: per-stream state carries across "
        "lines. Malformed lines are reported on stderr and skipped."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--venue", required=True, help=f"One of: {', '.join(sorted(VENUES))}.")

    def handle(self, *args: Any, venue: str, **options: Any) -> None:
        try:
            adapter = get_venue(venue)
        except LookupError as exc:
            raise CommandError(str(exc)) from None
        stdin: TextIO = sys.stdin
        state = adapter.new_stream_state()
        for number, line in enumerate(stdin, start=1):
            if not line.strip():
                continue
            try:
                events = adapter.parse(frame_from_line(adapter, line), time.time_ns())
            except ParseError as exc:
                self.stderr.write(f"parseframes {venue}: line {number}: skipped ({exc})")
                continue
            for event in state.apply(events):
                self.stdout.write(orjson.dumps(event_record(venue, event)).decode())
