"""Splitting a recovery range into REST windows the venue accepts.

Times are Unix milliseconds. Neighbouring windows share their boundary, so no instant
falls between two windows; a trade at the boundary may come back twice, and the
consistency layer drops the second copy.
"""

from __future__ import annotations

from dataclasses import dataclass

# Binance: "If both startTime and endTime are sent, the window must be < 1 hour".
DEFAULT_MAX_WINDOW_MS = 3_599_999


@dataclass(frozen=True, slots=True)
class TradeRecoveryWindow:
    symbol: str
    start_time: int
    end_time: int

    def __post_init__(self) -> None:
        if not self.symbol:
            raise ValueError("a recovery window needs a symbol")
        if not 0 <= self.start_time <= self.end_time:
            raise ValueError(f"need 0 <= start_time <= end_time, got {self.start_time}..{self.end_time}")


class TradeRecoveryWindowPlanner:
    __slots__ = ("_max_window_ms",)

    def __init__(self, max_window_ms: int = DEFAULT_MAX_WINDOW_MS) -> None:
        if max_window_ms < 1:
            raise ValueError("max_window_ms must be at least 1")
        self._max_window_ms = max_window_ms

    @property
    def max_window_ms(self) -> int:
        return self._max_window_ms

    def build_windows(self, symbol: str, start_time: int, end_time: int) -> tuple[TradeRecoveryWindow, ...]:
        """Return windows covering [start_time, end_time], each end - start <= max_window_ms."""
        TradeRecoveryWindow(symbol, start_time, end_time)  # validates the whole range first
        windows = []
        boundary = start_time
        while boundary < end_time:
            upper = min(boundary + self._max_window_ms, end_time)
            windows.append(TradeRecoveryWindow(symbol, boundary, upper))
            boundary = upper
        return tuple(windows)
