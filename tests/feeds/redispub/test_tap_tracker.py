"""The tap's sequence tracker: gaps, restarts and replays, per key."""

from __future__ import annotations

from feeds.distribution.redispub.sequence_tracker import Finding, SequenceTracker


def test_consecutive_sequences_are_ok_per_key() -> None:
    tracker = SequenceTracker()
    assert tracker.observe("a", "i1", 1).finding is Finding.FIRST
    assert tracker.observe("b", "i1", 5).finding is Finding.FIRST
    assert tracker.observe("a", "i1", 2).finding is Finding.OK
    assert tracker.observe("b", "i1", 6).finding is Finding.OK
    assert tracker.gaps == 0


def test_a_jump_is_a_gap_with_the_number_lost() -> None:
    tracker = SequenceTracker()
    tracker.observe("a", "i1", 3)
    seen = tracker.observe("a", "i1", 7)
    assert (seen.finding, seen.missed, seen.previous_seq) == (Finding.GAP, 3, 3)
    assert (tracker.gaps, tracker.missed) == (1, 3)


def test_a_new_instance_is_a_restart_not_a_gap() -> None:
    tracker = SequenceTracker()
    tracker.observe("a", "i1", 900)
    seen = tracker.observe("a", "i2", 1)
    assert seen.finding is Finding.INSTANCE_CHANGE and seen.previous_instance == "i1"
    assert tracker.gaps == 0 and tracker.instance_changes == 1
    assert tracker.observe("a", "i2", 2).finding is Finding.OK


def test_a_repeated_or_lower_seq_is_flagged() -> None:
    tracker = SequenceTracker()
    tracker.observe("a", "i1", 4)
    assert tracker.observe("a", "i1", 4).finding is Finding.BACKWARDS
    assert tracker.observe("a", "i1", 2).finding is Finding.BACKWARDS
