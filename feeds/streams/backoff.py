"""Exponential backoff with full jitter (AWS "Full Jitter"), on tenacity's wait strategy.

Delay n is uniform in [0, min(max_s, initial_s * 2**(n-1))]. Deterministic delays make
every stream that failed together retry together, the reconnect storm that gets an IP
banned; full jitter spreads them. The random source is injectable for tests.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from tenacity import wait_exponential, wait_random_exponential


class _SeededFullJitter(wait_random_exponential):
    """tenacity's full-jitter wait, drawing from a given Random instead of the module's."""

    def __init__(self, rng: random.Random, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rng = rng

    def __call__(self, retry_state: Any) -> float:
        high = wait_exponential.__call__(self, retry_state)
        return self._rng.uniform(self.min, high)


class FullJitterBackoff:
    """Successive redial delays; `reset()` after a success."""

    def __init__(self, *, initial_s: float = 0.5, max_s: float = 30.0, rng: random.Random | None = None) -> None:
        if not 0 < initial_s <= max_s:
            raise ValueError("need 0 < initial_s <= max_s")
        self._wait = _SeededFullJitter(rng or random.Random(), multiplier=initial_s, max=max_s)
        self._attempt = 0
        self.max_s = max_s

    @property
    def attempt(self) -> int:
        return self._attempt

    def next_delay(self) -> float:
        """Return the delay before the next attempt, in seconds."""
        self._attempt += 1
        return float(self._wait(SimpleNamespace(attempt_number=self._attempt)))

    def reset(self) -> None:
        self._attempt = 0
