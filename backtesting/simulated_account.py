"""One account traded in memory by a backtest: the executor's rules, the paper exchange's fills.

The same decisions as the live executor, on the same arithmetic (orders.money): an
entry is refused while the account holds a position or a working entry on the
instrument (`position_open`), when its quantity rounds to zero at the lot size
(`quantity_zero`), or when its reservation (notional, the market price buffer, the fee
reserve) exceeds the available capital (`insufficient_capital`). An exit first cancels the
position's working entry, then closes what is open and not already being closed
(`no_position`, `already_closing`); an entry that had not filled at all leaves nothing
to close (`no_position`). A closed trade's exit reason is its exit signal's kind
(`EXIT_LONG`, `EXIT_SHORT`), as the site books it. A reversal
(an entry of the other side while that side's exit works) waits for the exit's fill
and is placed then (`after_exit_fill`), or is refused (`refuse`).

Orders fill as on the paper exchange (orders.brokers.paper.match_quantity): a market
order at the tick's price, a limit order once a tick trades through it, each fill at
most the tick's volume, with the taker or maker fee. An order can fill from the first
tick after the one that caused its signal whose exchange time is at least
`latency_ns` later. Nothing here touches the database.

Risk limits are the live ones (orders.risk_limits), on the same pure functions. Exit
levels are watched on every tick of an open position from the tick after its first
entry fill: a tick that reaches one (`exit_trigger`, best price since entry by
`better`) sends the position's exit as a market order, filled from the next tick as on
the paper exchange; its outcome is counted like a signal's and the trade's exit reason
is the level (`stop_loss`, `take_profit`, `trailing_stop`). An entry is first asked the
kill switch, then the account limits (`limits_refusal`), and refused as `halted` with
the live reason. The daily loss (realized P&L, fees included, since 00:00 UTC of the
exchange time) engages the kill switch at the fill that reaches the limit; the backtest
releases it at the next 00:00 UTC, as a person would the next morning. Every trigger,
halt and refusal is kept in `risk_events`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from core.fixed_point import SCALE
from feeds.market import MarketData, fixed_to_decimal
from orders.brokers.paper import PaperFees, match_quantity
from orders.models.accounts import Reversal
from orders.models.lifecycle import OrderSide, OrderType, PositionSide
from orders.models.outcomes import Outcome
from orders.money import bps_of, entry_reservation, notional, pro_rata, round_to_step
from orders.risk_limits import (
    AccountLimits,
    ExitLevels,
    average_price,
    better,
    exit_trigger,
    limits_refusal,
    loss_reason,
)
from processor.backtest_report import ClosedTrade
from processor.signals import Signal, SignalKind

LONG, SHORT = "long", "short"
_SIDE_OF = {
    SignalKind.ENTRY_LONG: LONG,
    SignalKind.EXIT_LONG: LONG,
    SignalKind.ENTRY_SHORT: SHORT,
    SignalKind.EXIT_SHORT: SHORT,
}
_POSITION_SIDE = {LONG: PositionSide.LONG, SHORT: PositionSide.SHORT}  # as orders.risk_limits names them
END_OF_BACKTEST = "end_of_backtest"
DAY_NS = 86_400 * 1_000_000_000  # exchange time is UTC: a day starts at a multiple of it


@dataclass(frozen=True)
class SimulatedSettings:
    """A trade setting and the paper exchange's terms, as the live executor reads them."""

    capital: int
    quantity: int
    lot_size: int = SCALE // 1000
    tick_size: int = SCALE // 100
    multiplier: int = SCALE
    order_type: str = OrderType.MARKET
    reversal: str = Reversal.AFTER_EXIT_FILL
    fees: PaperFees = field(default_factory=PaperFees)
    market_buffer_bps: int = 50
    fee_reserve_bps: int = 10
    latency_ns: int = 0
    exit_levels: ExitLevels = field(default_factory=ExitLevels)
    limits: AccountLimits = field(default_factory=lambda: AccountLimits(None, None))


@dataclass(frozen=True)
class RiskEvent:
    """One risk decision, as the live site audits it: `risk.<level>`, `risk.daily_loss_limit`, `halted`."""

    at_ns: int
    event: str
    symbol: str
    message: str


@dataclass
class _Order:
    symbol: str
    side: str  # OrderSide
    entry: bool
    quantity: int
    price: int
    active_ns: int
    reserve: int = 0
    filled: int = 0
    released: int = 0
    reason: str = "signal"
    strategy: str = ""


@dataclass
class _Position:
    symbol: str
    side: str  # LONG or SHORT
    strategy: str
    quantity: int = 0  # open now
    cost: int = 0  # entry notional of what is open
    entry_quantity: int = 0
    entry_notional: int = 0
    exit_quantity: int = 0
    exit_notional: int = 0
    fees: int = 0
    pnl: int = 0
    entry_ns: int | None = None
    closing: int = 0  # working exit quantity
    exit_reason: str = "signal"
    best: int = 0  # the best price since its exit levels were armed


@dataclass
class SimulatedAccount:
    settings: SimulatedSettings
    outcomes: Counter[str] = field(default_factory=Counter)
    closed: list[ClosedTrade] = field(default_factory=list)
    realized: int = 0
    reserved_for_orders: int = 0
    reserved_for_positions: int = 0
    fills: int = 0
    risk_events: list[RiskEvent] = field(default_factory=list)
    _day: int = -1  # the UTC day of the last fill, whose realized P&L is `_day_realized`
    _day_realized: int = 0
    _halted_day: int | None = None  # the kill switch, engaged for the rest of that day
    _halt_reason: str = ""
    _watched: set[str] = field(default_factory=set)  # open positions whose exit levels are armed
    _positions: dict[str, _Position] = field(default_factory=dict)
    _orders: list[_Order] = field(default_factory=list)
    _waiting: dict[str, Signal] = field(default_factory=dict)  # reversal entries by symbol
    _last: dict[str, MarketData] = field(default_factory=dict)

    @property
    def available(self) -> int:
        return self.settings.capital + self.realized - self.reserved_for_orders - self.reserved_for_positions

    @property
    def open_positions(self) -> int:
        return len(self._positions)

    def signal(self, signal: Signal) -> str:
        """Decide `signal` as the executor does; return (and count) its outcome."""
        # A closed trade's exit reason is its exit signal's kind (EXIT_LONG, ...), as the site books it.
        outcome = self._entry(signal) if signal.is_entry else self._exit(signal, reason=signal.kind.value)
        self.outcomes[outcome] += 1
        return outcome

    def _entry(self, signal: Signal, *, active_ns: int | None = None) -> str:
        at_ns = signal.occurrence_ns if active_ns is None else active_ns
        refusal = self._entry_gate(at_ns)
        if refusal is not None:
            self.risk_events.append(RiskEvent(at_ns, Outcome.HALTED, signal.symbol, refusal))
            return Outcome.HALTED
        side = _SIDE_OF[signal.kind]
        position = self._positions.get(signal.symbol)
        if signal.symbol in self._waiting or any(o.entry and o.symbol == signal.symbol for o in self._orders):
            return Outcome.POSITION_OPEN
        if position is not None:
            if position.side != side and position.closing and self.settings.reversal == Reversal.AFTER_EXIT_FILL:
                self._waiting[signal.symbol] = signal
                return Outcome.WAITING_FOR_EXIT
            return Outcome.POSITION_OPEN
        s = self.settings
        quantity = round_to_step(s.quantity, s.lot_size)
        if quantity <= 0:
            return Outcome.QUANTITY_ZERO
        order_side = OrderSide.BUY if side == LONG else OrderSide.SELL
        price = round_to_step(signal.price, s.tick_size, up=order_side == OrderSide.SELL)
        buffer = s.market_buffer_bps if s.order_type == OrderType.MARKET else 0
        reserve = entry_reservation(quantity, price, s.multiplier, buffer_bps=buffer, fee_bps=s.fee_reserve_bps)
        if reserve > self.available:
            return Outcome.INSUFFICIENT_CAPITAL
        self.reserved_for_orders += reserve
        start = signal.occurrence_ns if active_ns is None else active_ns
        self._orders.append(
            _Order(
                symbol=signal.symbol,
                side=order_side,
                entry=True,
                quantity=quantity,
                price=price,
                active_ns=start + s.latency_ns,
                reserve=reserve,
                strategy=signal.strategy_name,
            )
        )
        self._positions[signal.symbol] = _Position(symbol=signal.symbol, side=side, strategy=signal.strategy_name)
        return Outcome.PLACED

    def _entry_gate(self, at_ns: int) -> str | None:
        """Why the entry gate refuses an entry at `at_ns`: the kill switch, then the account limits."""
        day = at_ns // DAY_NS
        if self._halted_day == day:
            return self._halt_reason
        limits = self.settings.limits
        if not limits.any:
            return None
        return limits_refusal(
            limits,
            realized_today=lambda: self._day_realized if self._day == day else 0,
            open_positions=lambda: len(self._positions),
        )

    def _exit(self, signal: Signal, *, reason: str = "signal") -> str:
        position = self._positions.get(signal.symbol)
        if position is None or position.side != _SIDE_OF[signal.kind]:
            return Outcome.NO_POSITION
        return self._close_position(position, signal.price, signal.occurrence_ns, reason)

    def _close_position(self, position: _Position, price: int, at_ns: int, reason: str) -> str:
        symbol = position.symbol
        # As the live exit flow: the position's working entry is cancelled first (its
        # unfilled reservation released), then what has filled is closed; a position
        # whose entry never filled ends empty.
        for order in [o for o in self._orders if o.entry and o.symbol == symbol]:
            self.reserved_for_orders -= order.reserve - pro_rata(order.reserve, order.filled, order.quantity)
            self._orders.remove(order)
        if position.quantity == 0:
            del self._positions[symbol]
            self._watched.discard(symbol)
            return Outcome.NO_POSITION
        quantity = position.quantity - position.closing
        if quantity <= 0:
            return Outcome.ALREADY_CLOSING
        position.closing += quantity
        position.exit_reason = reason
        self._watched.discard(symbol)  # an exit works: the watcher does not fire at it again
        self._orders.append(
            _Order(
                symbol=symbol,
                side=OrderSide.SELL if position.side == LONG else OrderSide.BUY,
                entry=False,
                quantity=quantity,
                price=price,
                active_ns=at_ns + self.settings.latency_ns,
                reason=reason,
            )
        )
        return Outcome.PLACED

    def works_on(self, symbol: str) -> bool:
        """Whether a tick of `symbol` can change anything here: a working order, or armed exit levels, on it.

        A tick of an instrument without either only becomes its latest price (`seen`), so
        a caller replaying a tape may skip it and hand over the instrument's last tick.
        """
        return symbol in self._watched or any(o.symbol == symbol for o in self._orders)

    @property
    def working(self) -> bool:
        """Whether any order works or any position's exit levels are armed (else no tick changes anything)."""
        return bool(self._orders) or bool(self._watched)

    def seen(self, tick: MarketData) -> None:
        """Take `tick` as its instrument's latest price, as `tick` does (the end of a run closes there)."""
        self._last[tick.symbol] = tick

    def tick(self, tick: MarketData) -> None:
        """Fill the working orders of the tick's instrument that it trades through, then watch its exit levels."""
        self._last[tick.symbol] = tick
        if self._orders:
            self._match(tick)
        if not self.settings.exit_levels.any:
            return
        position = self._positions.get(tick.symbol)
        if position is None or not position.quantity or position.closing:
            return
        if tick.symbol in self._watched:
            self._watch(position, tick)
        else:
            # Armed from the next tick, as the live watcher first sees a position after its fill.
            position.best = average_price(position.cost, position.quantity)
            self._watched.add(tick.symbol)

    def _match(self, tick: MarketData) -> None:
        for order in [o for o in self._orders if o.symbol == tick.symbol and tick.ts_event >= o.active_ns]:
            limit = None if self.settings.order_type == OrderType.MARKET or not order.entry else order.price
            order_type = OrderType.MARKET if limit is None else OrderType.LIMIT
            quantity, price = match_quantity(
                side=order.side, order_type=order_type, limit=limit, remaining=order.quantity - order.filled, tick=tick
            )
            if quantity:
                fee_bps = (
                    self.settings.fees.taker_bps if order_type == OrderType.MARKET else self.settings.fees.maker_bps
                )
                self._fill(order, quantity, price, fee_bps, tick.ts_event)

    def _watch(self, position: _Position, tick: MarketData) -> None:
        """The live watcher's step for one tick of a watched position: a level reached sends its exit."""
        side = _POSITION_SIDE[position.side]
        position.best = better(side, position.best, tick.price)
        entry = average_price(position.cost, position.quantity)
        level = exit_trigger(
            side=side,
            entry_price=entry,
            best_price=position.best,
            price=tick.price,
            levels=self.settings.exit_levels,
        )
        if level is None:
            return
        self.risk_events.append(
            RiskEvent(
                tick.ts_event,
                f"risk.{level}",
                position.symbol,
                f"{position.symbol}: {level.replace('_', ' ')} at {fixed_to_decimal(tick.price)} "
                f"(entry {fixed_to_decimal(entry)}, best {fixed_to_decimal(position.best)})",
            )
        )
        # The exit goes through the exit flow like a signal (its outcome counted); it
        # fills from the next tick on, as the paper exchange fills the watcher's market order.
        self.outcomes[self._close_position(position, tick.price, tick.ts_event, level)] += 1

    def _fill(self, order: _Order, quantity: int, price: int, fee_bps: int, at_ns: int) -> None:
        position = self._positions[order.symbol]
        value = notional(quantity, price, self.settings.multiplier)
        fee = bps_of(value, fee_bps)
        before, order.filled = order.filled, order.filled + quantity
        realized_before = self.realized
        self.fills += 1
        position.fees += fee
        position.pnl -= fee
        self.realized -= fee
        if order.entry:
            release = pro_rata(order.reserve, order.filled, order.quantity) - pro_rata(
                order.reserve, before, order.quantity
            )
            self.reserved_for_orders -= release
            self.reserved_for_positions += value
            position.quantity += quantity
            position.cost += value
            position.entry_quantity += quantity
            position.entry_notional += value
            position.entry_ns = at_ns if position.entry_ns is None else position.entry_ns
        else:
            unlock = pro_rata(position.cost, quantity, position.quantity)
            gain = value - unlock if position.side == LONG else unlock - value
            self.reserved_for_positions -= unlock
            self.realized += gain
            position.pnl += gain
            position.cost -= unlock
            position.quantity -= quantity
            position.closing -= quantity
            position.exit_quantity += quantity
            position.exit_notional += value
        if order.filled == order.quantity:
            self._orders.remove(order)
        self._count_today(at_ns, self.realized - realized_before)
        if not order.entry and position.quantity == 0:
            self._close(position, at_ns)

    def _count_today(self, at_ns: int, delta: int) -> None:
        """Add a fill's realized P&L to its UTC day's; reaching the daily loss limit engages the kill switch."""
        day = at_ns // DAY_NS
        if day != self._day:
            self._day, self._day_realized = day, 0
        self._day_realized += delta
        limit = self.settings.limits.daily_loss_limit
        if limit is None or self._halted_day == day:
            return
        reason = loss_reason(self._day_realized, limit)
        if reason is not None:
            self._halted_day, self._halt_reason = day, reason
            self.risk_events.append(RiskEvent(at_ns, "risk.daily_loss_limit", "", reason))

    def _close(self, position: _Position, at_ns: int) -> None:
        del self._positions[position.symbol]
        self._watched.discard(position.symbol)
        self.closed.append(
            ClosedTrade(
                instrument=position.symbol,
                side=position.side,
                quantity=position.entry_quantity,
                entry_time_ns=position.entry_ns or at_ns,
                entry_price=position.entry_notional * SCALE // position.entry_quantity,
                exit_time_ns=at_ns,
                exit_price=position.exit_notional * SCALE // position.exit_quantity,
                fees=position.fees,
                pnl=position.pnl,
                exit_reason=position.exit_reason,
                strategy=position.strategy,
            )
        )
        waiting = self._waiting.pop(position.symbol, None)
        if waiting is not None:
            # The reversal's entry goes out once the exit it follows has filled; its
            # outcome replaces the waiting one, as the live executor records it.
            self._settle_waiting(self._entry(waiting, active_ns=at_ns))

    def _settle_waiting(self, outcome: str) -> None:
        self.outcomes[Outcome.WAITING_FOR_EXIT] -= 1
        if not self.outcomes[Outcome.WAITING_FOR_EXIT]:
            del self.outcomes[Outcome.WAITING_FOR_EXIT]
        self.outcomes[outcome] += 1

    def close_all(self) -> None:
        """Close what is still open at each instrument's last price with the taker fee (the run's end)."""
        for order in [o for o in self._orders if o.entry]:
            self.reserved_for_orders -= order.reserve - pro_rata(order.reserve, order.filled, order.quantity)
            self._orders.remove(order)
        self._orders = []
        for _ in self._waiting:
            self._settle_waiting(Outcome.STOPPED)  # the run ended before the exit it follows filled
        self._waiting.clear()
        self._watched.clear()  # the run's end closes what is open, whatever its levels
        for position in list(self._positions.values()):
            last = self._last.get(position.symbol)
            if position.quantity == 0 or last is None:
                del self._positions[position.symbol]
                continue
            position.closing = position.quantity
            position.exit_reason = END_OF_BACKTEST
            order = _Order(
                symbol=position.symbol,
                side=OrderSide.SELL if position.side == LONG else OrderSide.BUY,
                entry=False,
                quantity=position.quantity,
                price=last.price,
                active_ns=last.ts_event,
                reason=END_OF_BACKTEST,
            )
            self._orders.append(order)
            self._fill(order, order.quantity, last.price, self.settings.fees.taker_bps, last.ts_event)


def risk_events_as_json(events: list[RiskEvent], *, limit: int | None = None) -> dict[str, Any]:
    """The risk events as JSON: a count per event, and the events (the first `limit` of them)."""
    kept = events if limit is None else events[:limit]
    return {
        "risk_event_counts": dict(sorted(Counter(e.event for e in events).items())),
        "risk_events": [{"at_ns": e.at_ns, "event": e.event, "symbol": e.symbol, "message": e.message} for e in kept],
    }
