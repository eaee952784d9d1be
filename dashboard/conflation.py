"""What one browser is sent, and when: conflated, bounded, acknowledged.

The channel layer hands the dashboard consumer every group message as it comes. A
browser needs only the latest price and strategy output per instrument, a few times a
second, so `BrowserOutbox` keeps the latest row per key and releases one batch per
interval. Signals, prompts, orders and control changes are never conflated: they are
queued in order, bounded. Each batch carries a sequence number the browser echoes back
(`{"type": "ack", "seq": n}`); a browser that falls `max_unacked` batches behind, or
whose ordered queue overflows, is stalled and must be disconnected rather than
buffered for without bound. Pure: no I/O, the clock is passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

PRICES = "prices"
OUTPUTS = "strategy.output"
SIGNALS = "strategy.signal"

# Layer message type -> (browser message type, list field, key of one row).
_CONFLATED: dict[str, tuple[str, str, Callable[[dict[str, Any]], tuple[Any, ...]]]] = {
    "market.prices": (PRICES, "prices", lambda row: (row["feed"], row["symbol"])),
    "strategy.output": (OUTPUTS, "outputs", lambda row: (row["strategy_id"], row["feed"], row["venue_symbol"])),
}


@dataclass
class OutboxStats:
    batches_sent: int = 0
    rows_conflated: int = 0  # rows replaced by a newer row before they were sent
    rows_filtered: int = 0  # strategy rows of strategies this user may not see


@dataclass
class BrowserOutbox:
    interval_s: float
    max_unacked: int
    max_ordered: int = 1000
    # None = every strategy; otherwise only rows of these strategy ids reach the browser.
    visible_strategies: Collection[int] | None = None
    stats: OutboxStats = field(default_factory=OutboxStats)
    _latest: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = field(default_factory=dict)
    _ordered: deque[dict[str, Any]] = field(default_factory=deque)
    _overflowed: bool = False
    _last_sent_at: float = float("-inf")
    _sent_seq: int = 0
    _acked_seq: int = 0

    # -- in ------------------------------------------------------------------------

    def offer(self, message: dict[str, Any]) -> None:
        """Fold one channel-layer message into what is waiting for the browser."""
        kind = message["type"]
        if kind in _CONFLATED:
            browser_type, list_field, key_of = _CONFLATED[kind]
            latest = self._latest.setdefault(browser_type, {})
            for row in message[list_field]:
                if not self._visible(row):
                    continue
                if latest.get(key_of(row)) is not None:
                    self.stats.rows_conflated += 1
                latest[key_of(row)] = row
            return
        if kind == "strategy.signal":
            rows = [row for row in message["signals"] if self._visible(row)]
            if rows:
                self._enqueue({"type": SIGNALS, "signals": rows})
            return
        # Anything else (prompts, orders, controls) goes through unchanged, in order.
        self._enqueue({**message, "type": kind})

    def ack(self, seq: int) -> None:
        """The browser has processed every batch up to `seq`."""
        if self._acked_seq < seq <= self._sent_seq:
            self._acked_seq = seq

    def _visible(self, row: dict[str, Any]) -> bool:
        strategy_id = row.get("strategy_id")
        if strategy_id is None or self.visible_strategies is None or strategy_id in self.visible_strategies:
            return True
        self.stats.rows_filtered += 1
        return False

    def _enqueue(self, message: dict[str, Any]) -> None:
        if len(self._ordered) >= self.max_ordered:
            self._overflowed = True  # losing an order update silently is worse than a reconnect
            return
        self._ordered.append(message)

    # -- out -----------------------------------------------------------------------

    @property
    def stalled(self) -> bool:
        return self._overflowed or self._sent_seq - self._acked_seq >= self.max_unacked

    @property
    def pending(self) -> bool:
        return bool(self._ordered) or any(self._latest.values())

    def wait_s(self, now: float) -> float:
        """Seconds until the next batch may go out (0 = now)."""
        return max(0.0, self._last_sent_at + self.interval_s - now)

    def take(self, now: float) -> list[dict[str, Any]]:
        """Return the next batch (each message stamped with `seq`), or [] when none is due.

        Ordered messages first (a signal before the price that follows it is fine; an
        order update must not wait behind prices), then one row per conflated key.
        """
        if self.stalled or not self.pending or self.wait_s(now) > 0:
            return []
        batch = list(self._ordered)
        self._ordered.clear()
        for browser_type, list_field in ((PRICES, "prices"), (OUTPUTS, "outputs")):
            rows = self._latest.get(browser_type)
            if rows:
                batch.append({"type": browser_type, list_field: [rows[key] for key in sorted(rows, key=repr)]})
                rows.clear()
        self._sent_seq += 1
        self._last_sent_at = now
        self.stats.batches_sent += 1
        return [{**message, "seq": self._sent_seq} for message in batch]
