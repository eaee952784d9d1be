"""Golden files of recorded frames: tests/fixtures/<venue>/frames.txt beside expected.jsonl.

`frames.txt` holds one raw frame per line (base64 for binary venues). `expected.jsonl`
holds one line per frame: `{"frame": n, "events": [...]}` with every event as a golden
record, or `{"frame": n, "error": reason}` for a frame the adapter must reject.
Regenerate after a deliberate change, then review the diff:

    .venv/bin/python -m tests.feeds.venues.golden --write [venue ...]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
# Frames are parsed as if they all arrived at this instant.
RECEIVED_NS = 1_732_924_800_500_000_000


def frames_path(venue: str) -> Path:
    return FIXTURES / venue / "frames.txt"


def expected_path(venue: str) -> Path:
    return FIXTURES / venue / "expected.jsonl"


def read_frames(venue_name: str) -> list[bytes]:
    from feeds.venues import get_venue
    from feeds.venues.frames import frame_from_line

    venue = get_venue(venue_name)
    lines = frames_path(venue_name).read_text().splitlines()
    return [frame_from_line(venue, line) for line in lines]


def render(venue_name: str, frames: list[bytes]) -> list[dict[str, Any]]:
    """Return the expected-file rows the adapter produces for `frames` today."""
    from feeds.venues import get_venue
    from feeds.venues.base import ParseError
    from feeds.venues.records import golden_record

    venue = get_venue(venue_name)
    rows: list[dict[str, Any]] = []
    for number, frame in enumerate(frames, start=1):
        try:
            events = venue.parse(frame, RECEIVED_NS)
        except ParseError as exc:
            rows.append({"frame": number, "error": exc.reason})
            continue
        rows.append({"frame": number, "events": [golden_record(venue_name, event) for event in events]})
    return rows


def read_expected(venue_name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in expected_path(venue_name).read_text().splitlines() if line]


def write_expected(venue_name: str) -> None:
    rows = render(venue_name, read_frames(venue_name))
    expected_path(venue_name).write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    import django

    django.setup()
    from feeds.venues import VENUES

    if argv[:1] != ["--write"]:
        raise SystemExit("usage: python -m tests.feeds.venues.golden --write [venue ...]")
    for name in argv[1:] or sorted(VENUES):
        if frames_path(name).exists():
            write_expected(name)
            print(f"wrote {expected_path(name)}")


if __name__ == "__main__":
    main(sys.argv[1:])
