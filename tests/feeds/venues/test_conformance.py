"""One conformance suite for every registered venue: golden files, determinism, purity."""

from __future__ import annotations

import socket
import time

import pytest

from feeds.venues import VENUES
from feeds.venues.base import ParseError
from tests.feeds.venues import golden
from tests.feeds.venues.invariants import check_event, check_sequence

VENUE_NAMES = sorted(VENUES)


def test_every_registered_venue_has_a_recording_and_its_expected_events() -> None:
    for name in VENUE_NAMES:
        assert golden.frames_path(name).exists(), f"{name} has no recorded frames"
        assert golden.expected_path(name).exists(), f"{name} has no expected events"


def test_no_fixture_directory_belongs_to_an_unregistered_venue() -> None:
    directories = {path.parent.name for path in golden.FIXTURES.glob("*/frames.txt")}
    assert directories <= set(VENUE_NAMES), directories - set(VENUE_NAMES)


@pytest.mark.parametrize("venue", VENUE_NAMES)
def test_parse_of_recorded_frames_equals_the_golden_file(venue: str) -> None:
    frames = golden.read_frames(venue)
    expected = golden.read_expected(venue)
    assert len(expected) == len(frames), "expected file is stale: regenerate and review it"
    assert golden.render(venue, frames) == expected


@pytest.mark.parametrize("venue", VENUE_NAMES)
def test_recordings_cover_trades_and_rejects(venue: str) -> None:
    rows = golden.read_expected(venue)
    kinds = {event["kind"] for row in rows for event in row.get("events", [])}
    # A venue that streams no trades (Tabdeal: order books only) records its own kinds.
    assert "trade" in kinds if "trades" in VENUES[venue].channels else kinds
    assert any("error" in row for row in rows), "record at least one malformed frame"


@pytest.mark.parametrize("venue", VENUE_NAMES)
def test_every_event_of_the_recording_satisfies_the_invariants(venue: str) -> None:
    events = []
    for frame in golden.read_frames(venue):
        try:
            events.extend(VENUES[venue].parse(frame, golden.RECEIVED_NS))
        except ParseError:
            continue
    assert events
    for event in events:
        check_event(event)
    check_sequence(events)


@pytest.mark.parametrize("venue", VENUE_NAMES)
def test_the_same_frame_twice_gives_equal_events(venue: str) -> None:
    for frame in golden.read_frames(venue):
        outcomes = []
        for _ in range(2):
            try:
                outcomes.append(VENUES[venue].parse(frame, golden.RECEIVED_NS))
            except ParseError as exc:
                outcomes.append(exc.reason)
        assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("venue", VENUE_NAMES)
def test_parse_touches_neither_network_nor_clock(venue: str, monkeypatch: pytest.MonkeyPatch) -> None:
    frames = golden.read_frames(venue)

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("parse must do no I/O and read no clock")

    for name in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "sleep"):
        monkeypatch.setattr(time, name, forbidden)
    monkeypatch.setattr(socket, "socket", forbidden)
    monkeypatch.setattr(socket, "create_connection", forbidden)
    monkeypatch.setattr(socket, "getaddrinfo", forbidden)
    for frame in frames:
        try:
            VENUES[venue].parse(frame, golden.RECEIVED_NS)
        except ParseError:
            pass


@pytest.mark.parametrize("venue", VENUE_NAMES)
def test_parse_stamps_the_given_receive_time(venue: str) -> None:
    for frame in golden.read_frames(venue):
        try:
            events = VENUES[venue].parse(frame, 7)
        except ParseError:
            continue
        assert all(event.ts_recv == 7 for event in events)
