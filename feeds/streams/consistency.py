"""The consistency layer: one state per symbol, the checkpoint, and duplicate removal.

Live and recovered trades both pass through the one TradeStreamConsistencyController,
so a trade fetched twice (a shared window boundary, a live frame that REST also
returned) is delivered once. The checkpoint is the last accepted trade, stored whole
(a MarketData already carries a consistent symbol, id, time, price and size), and only
an accepted trade moves it: a duplicate or a rejected trade changes nothing.

Trade ids that are decimal integers increase per symbol on every venue here (Binance
aggregate ids, bitFlyer execution ids), so a numeric id at or below the checkpoint's
is a repeat however old; other ids (KuCoin's hex trade ids) are remembered in a
bounded window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from feeds.market import MarketData

DEFAULT_DEDUP_WINDOW = 50_000


class TradeRejected(ValueError):
    """A trade that cannot be accepted (wrong symbol, no id, impossible numbers)."""


class TradeStreamState:
    """One symbol's checkpoint and its bounded window of recently accepted trade ids."""

    __slots__ = ("_capacity", "_last_key", "_last_trade", "_seen", "_window", "symbol")

    def __init__(self, symbol: str, *, dedup_window: int = DEFAULT_DEDUP_WINDOW) -> None:
        if dedup_window < 1:
            raise ValueError("dedup_window must be at least 1")
        self.symbol = symbol
        self._last_trade: MarketData | None = None
        self._last_key: int | None = None  # the checkpoint's id as a number, when it is one
        self._window: deque[str] = deque()
        self._seen: set[str] = set()
        self._capacity = dedup_window

    @property
    def last_trade(self) -> MarketData | None:
        """The checkpoint: the last accepted trade."""
        return self._last_trade

    @property
    def last_trade_id(self) -> str | None:
        return None if self._last_trade is None else self._last_trade.trade_id

    def has_seen(self, trade_id: str) -> bool:
        return trade_id in self._seen

    def _accept(self, trade: MarketData, key: int | None) -> None:
        trade_id = trade.trade_id
        if trade_id is not None and key is None:
            # Only ids that are not increasing numbers need the window: for numeric ids the
            # checkpoint comparison already catches every repeat.
            if len(self._window) == self._capacity:
                self._seen.discard(self._window.popleft())
            self._window.append(trade_id)
            self._seen.add(trade_id)
        self._last_trade = trade
        self._last_key = key


class TradeStreamStateStoreProtocol(Protocol):
    def get(self, symbol: str) -> TradeStreamState | None: ...


class TradeStreamStateStore:
    """Holds the states; only the consistency controller creates or changes them."""

    __slots__ = ("_dedup_window", "_states")

    def __init__(self, *, dedup_window: int = DEFAULT_DEDUP_WINDOW) -> None:
        self._states: dict[str, TradeStreamState] = {}
        self._dedup_window = dedup_window

    def get(self, symbol: str) -> TradeStreamState | None:
        return self._states.get(symbol)

    def symbols(self) -> list[str]:
        return sorted(self._states)

    def _get_or_create(self, symbol: str) -> TradeStreamState:
        state = self._states.get(symbol)
        if state is None:
            state = self._states[symbol] = TradeStreamState(symbol, dedup_window=self._dedup_window)
        return state


@dataclass
class ConsistencyStats:
    accepted: int = 0
    duplicates: int = 0  # same id seen, or an id at or below the checkpoint
    rejected: int = 0


def _order_key(trade_id: str | None) -> int | None:
    """Trade ids that are decimal integers are increasing per symbol on every venue here."""
    if trade_id is not None and trade_id.isdigit():
        return int(trade_id)
    return None


class TradeStreamConsistencyController:
    """Accepts each trade once, in order; the sole writer of the checkpoint."""

    __slots__ = ("_store", "stats")

    def __init__(self, store: TradeStreamStateStore) -> None:
        self._store = store
        self.stats = ConsistencyStats()

    @property
    def store(self) -> TradeStreamStateStore:
        return self._store

    def accept(self, trade: MarketData) -> MarketData | None:
        """Return `trade` when it is new (the checkpoint moves to it), None for a duplicate.

        Raises TradeRejected for a trade that is not a valid trade; nothing changes then.
        """
        if trade.price <= 0 or trade.volume < 0 or not trade.symbol:
            self.stats.rejected += 1
            raise TradeRejected(f"impossible trade {trade}")
        state = self._store._get_or_create(trade.symbol)
        trade_id = trade.trade_id
        key = None
        if trade_id is not None:
            if trade_id.isdigit():
                key = int(trade_id)
                last_key = state._last_key
                if last_key is not None and key <= last_key:
                    # At or before the checkpoint: already delivered.
                    self.stats.duplicates += 1
                    return None
            elif state.has_seen(trade_id):
                self.stats.duplicates += 1
                return None
        state._accept(trade, key)
        self.stats.accepted += 1
        return trade

    def restore_checkpoint(self, trade: MarketData) -> None:
        """Seed a symbol's checkpoint from its persisted copy (process start only)."""
        state = self._store._get_or_create(trade.symbol)
        if state.last_trade is None:
            state._accept(trade, _order_key(trade.trade_id))


class UncheckedTrades(TradeStreamConsistencyController):
    """Accepts every trade as it comes: for local sources, which have no reconnect that
    could repeat a trade, and whose recordings are replayed exactly as recorded."""

    __slots__ = ()

    def accept(self, trade: MarketData) -> MarketData | None:
        return trade
