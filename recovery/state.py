"""A watchable latest value (a conflated state stream) for token states inside one process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class StateCell(Generic[T]):
    """Holds the current value; watchers see the current value, then every later one.

    Conflated: a slow watcher skips intermediate values and sees the latest, which is
    what a state (not an event log) needs. Unbounded watchers cost one Event each.
    """

    def __init__(self, initial: T) -> None:
        self._value = initial
        self._version = 0
        self._changed = asyncio.Event()

    @property
    def value(self) -> T:
        return self._value

    @property
    def version(self) -> int:
        return self._version

    def set(self, value: T) -> None:
        self._value = value
        self._version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_for(self, predicate: Callable[[T], bool]) -> T:
        """Return the first value (current included) that satisfies `predicate`."""
        while True:
            changed = self._changed
            if predicate(self._value):
                return self._value
            await changed.wait()

    async def updates(self) -> AsyncIterator[T]:
        """Yield the current value, then each newer one (skipping any missed in between)."""
        seen = -1
        while True:
            changed = self._changed
            if self._version != seen:
                seen = self._version
                yield self._value
                continue
            await changed.wait()
