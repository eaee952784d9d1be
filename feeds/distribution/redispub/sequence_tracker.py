"""What `manage.py tap` checks on every message: sequence gaps and instance changes.

`publish_seq` counts one key's messages within one publishing instance, so per key:
the next message has seq + 1; a larger jump means pub/sub dropped messages; a new
`instance_id` means the publisher restarted (its count starts again), which is not a
loss; a seq that does not move forward under the same instance is a replay or a second
publisher using the same instance id, and is flagged too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Finding(StrEnum):
    FIRST = "first"
    OK = "ok"
    GAP = "gap"
    INSTANCE_CHANGE = "instance-change"
    BACKWARDS = "backwards"


@dataclass(frozen=True)
class Observation:
    finding: Finding
    missed: int = 0  # messages lost, for GAP
    previous_seq: int | None = None
    previous_instance: str | None = None


class SequenceTracker:
    """Per key: the last (instance_id, publish_seq) seen."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, int]] = {}
        self.gaps = 0
        self.missed = 0
        self.instance_changes = 0

    def observe(self, key: str, instance_id: str, seq: int) -> Observation:
        last = self._last.get(key)
        self._last[key] = (instance_id, seq)
        if last is None:
            return Observation(Finding.FIRST)
        last_instance, last_seq = last
        if instance_id != last_instance:
            self.instance_changes += 1
            return Observation(Finding.INSTANCE_CHANGE, previous_seq=last_seq, previous_instance=last_instance)
        if seq == last_seq + 1:
            return Observation(Finding.OK)
        if seq > last_seq + 1:
            self.gaps += 1
            self.missed += seq - last_seq - 1
            return Observation(Finding.GAP, missed=seq - last_seq - 1, previous_seq=last_seq)
        return Observation(Finding.BACKWARDS, previous_seq=last_seq)
