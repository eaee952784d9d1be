"""Seeded fuzzing of every venue's parser: 100,000 mutated golden frames per venue.

Each frame either parses into events whose every value is in range (positive prices,
non-negative sizes, non-empty symbols, integers within the documented bound) or is
refused with ParseError and a named reason; anything else escaping a parser would kill
the stream task. The frames are deterministic (tests/feeds/venues/mutations.py):
FUZZ_SEED and FUZZ_FRAMES change the seed and the count per venue.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from feeds.venues import VENUES
from feeds.venues.base import ParseError
from tests.feeds.venues import golden
from tests.feeds.venues.invariants import check_event
from tests.feeds.venues.mutations import MUTATIONS, mutated_frames

FRAMES_PER_VENUE = int(os.environ.get("FUZZ_FRAMES", "100000"))
SEED = int(os.environ.get("FUZZ_SEED", "20261201"))
NAMED_REASONS = frozenset(
    {
        "json",
        "schema",
        "depth",
        "utf8",
        "number",
        "price",
        "size",
        "symbol",
        "value",
        "protobuf",
        "venue_error",
    }
)
# The reasons the mutation classes must provoke, per venue: a parser that let such
# frames through, or refused them under another name, fails here.
EXPECTED_REASONS = {
    "binance-usdm": {"json", "schema", "depth", "utf8", "number", "price", "size", "symbol"},
    "bitflyer": {"json", "schema", "depth", "utf8", "number", "price", "size", "symbol"},
    "kucoin-futures": {"json", "schema", "depth", "utf8", "number", "price", "size", "symbol"},
    "simulated": {"json", "schema", "depth", "utf8", "number", "price", "size", "symbol"},
    "replay": {"schema", "utf8", "number", "price", "size", "symbol", "value"},
    "upstox": {"protobuf", "number", "price", "size", "symbol"},
    "dzengi": {"json", "schema", "depth", "utf8", "number", "price", "size", "symbol"},
    "tabdeal": {"json", "schema", "depth", "utf8", "number", "price", "size", "symbol"},
}


@pytest.mark.parametrize("venue", sorted(VENUES))
def test_mutated_frames_parse_into_in_range_events_or_are_refused_with_a_named_reason(venue: str) -> None:
    adapter = VENUES[venue]
    state = adapter.new_stream_state()
    refused: Counter[str] = Counter()
    parsed_by_class: Counter[str] = Counter()
    escaped: list[tuple[int, str, bytes, BaseException]] = []
    broken: list[tuple[int, str, bytes, AssertionError]] = []
    for number, (kind, frame) in enumerate(mutated_frames(venue, FRAMES_PER_VENUE, SEED)):
        try:
            events = adapter.parse(frame, golden.RECEIVED_NS)
        except ParseError as exc:
            refused[exc.reason] += 1
            continue
        except Exception as exc:  # the failure this test exists for: collected, shown below
            escaped.append((number, kind, frame, exc))
            continue
        parsed_by_class[kind] += 1
        try:
            for event in events:
                check_event(event)
            for event in state.apply(events):  # the venue's per-stream state (Upstox vtt deltas)
                check_event(event)
        except AssertionError as exc:
            broken.append((number, kind, frame, exc))

    assert not escaped, (
        f"{len(escaped)} frames raised something else than ParseError (seed {SEED}), first: "
        + "; ".join(
            f"#{n} {kind} {type(exc).__name__}: {exc} in {frame[:300]!r}" for n, kind, frame, exc in escaped[:3]
        )
    )
    assert not broken, f"{len(broken)} frames parsed into out-of-range events (seed {SEED}), first: " + "; ".join(
        f"#{n} {kind} {exc} from {frame[:300]!r}" for n, kind, frame, exc in broken[:3]
    )
    assert set(refused) <= NAMED_REASONS, f"unnamed reasons: {set(refused) - NAMED_REASONS}"
    assert EXPECTED_REASONS[venue] <= set(refused), (
        f"never refused as {EXPECTED_REASONS[venue] - set(refused)}: {refused}"
    )
    assert sum(refused.values()) + sum(parsed_by_class.values()) == FRAMES_PER_VENUE


def test_the_mutations_are_the_same_for_the_same_seed_and_cover_every_class() -> None:
    first = list(mutated_frames("binance-usdm", 900, SEED))
    assert first == list(mutated_frames("binance-usdm", 900, SEED))
    assert first != list(mutated_frames("binance-usdm", 900, SEED + 1))
    assert Counter(kind for kind, _ in first) == dict.fromkeys(MUTATIONS, 100)
