"""Log a repeating failure once per interval, with a count, instead of once per attempt.

A loop that retries several times a second against a dead dependency would otherwise
write a traceback per attempt (gigabytes a day) and bury everything else. The first
failure of a run is logged in full, with its traceback; later ones are counted, and at
most one line per interval says how many there were and what the last one was:

    redis-publisher: Redis: ConnectionError(...)                          (+ traceback)
    redis-publisher: Redis: failed 37 more times in the last 10 s: ConnectionError(...)
    redis-publisher: Redis: publishing again (97 messages lost) after 41 failure(s)

`succeeded()` ends the run (flushing the count), so the next failure is logged in full.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class FailureLog:
    """Throttled logging of one repeating failure (one instance per loop or per key)."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        interval_s: float = 10.0,
        level: int = logging.WARNING,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self.what = what
        self.interval_s = interval_s
        self._level = level
        self._monotonic = monotonic
        self.failures = 0  # in the current run of failures
        self._unreported = 0
        self._last_error = ""
        self._reported_at = 0.0

    @property
    def failing(self) -> bool:
        return self.failures > 0

    def failed(self, error: BaseException | str) -> None:
        """Record one failure: logged in full if it is the first of a run, else counted."""
        text = error if isinstance(error, str) else repr(error)
        self.failures += 1
        self._last_error = text
        now = self._monotonic()
        if self.failures == 1:
            self._reported_at = now
            exc_info = error if isinstance(error, BaseException) else None
            self._log.log(self._level, "%s: %s", self.what, text, exc_info=exc_info)
            return
        self._unreported += 1
        if now - self._reported_at >= self.interval_s:
            self._flush(now)

    def succeeded(self, message: str = "working again") -> None:
        """End a run of failures (a no-op when there was none)."""
        if not self.failures:
            return
        if self._unreported:
            self._flush(self._monotonic())
        self._log.info("%s: %s after %d failure(s)", self.what, message, self.failures)
        self.failures = 0

    def _flush(self, now: float) -> None:
        self._log.log(
            self._level,
            "%s: failed %d more times in the last %.0f s: %s",
            self.what,
            self._unreported,
            now - self._reported_at,
            self._last_error,
        )
        self._unreported = 0
        self._reported_at = now
