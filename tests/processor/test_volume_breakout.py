"""`volume_breakout` against hand-computed bars: close-gated breakouts, hold, cooldown, reversal."""

from __future__ import annotations

from core.fixed_point import SCALE
from processor.signals import Position, SignalKind
from processor.strategies.volume_breakout import VolumeBreakout
from tests.processor.factories import tick


def params(**overrides):
    return {"bar_volume": "1", "lookback": 2, "hold_bars": 2, "cooldown_bars": 1, **overrides}


class Bars:
    """Feed one-tick bars (volume 1 = bar_volume) at the given prices, one second apart."""

    def __init__(self, strategy: VolumeBreakout) -> None:
        self.strategy = strategy
        self.t = 0

    def close(self, price: float) -> list[SignalKind]:
        self.t += 1
        rows, signals = [], []
        self.strategy.fold([tick("X", self.t, price, 1)], rows, signals)
        return [kind for _, kind, _, _ in signals]


def test_a_bar_closes_on_the_tick_that_reaches_bar_volume_exactly_with_no_carry_over():
    vb = VolumeBreakout(params(bar_volume="0.3"))
    rows, signals = [], []
    vb.fold(
        [tick("X", 1, 10, "0.1"), tick("X", 2, 12, "0.1"), tick("X", 3, 9, "0.1"), tick("X", 4, 11, "0.5")],
        rows,
        signals,
    )
    # 0.1 + 0.1 + 0.1 == 0.3 exactly (fixed point): the third tick closes bar 0.
    assert rows[2] == (1_000_000_000, 3_000_000_000, 10 * SCALE, 12 * SCALE, 9 * SCALE, 9 * SCALE, 3 * SCALE // 10)
    # The next tick opens a new bar with only its own volume, and closes it (0.5 >= 0.3).
    assert rows[3] == (4_000_000_000, 4_000_000_000, 11 * SCALE, 11 * SCALE, 11 * SCALE, 11 * SCALE, SCALE // 2)
    assert vb.closed_bars == 2


def test_every_tick_updates_the_output_with_the_bar_start_time_but_signals_wait_for_the_close():
    vb = VolumeBreakout(params(bar_volume="2", lookback=1))
    rows, signals = [], []
    vb.fold([tick("X", 1, 10, 1), tick("X", 2, 10, 1)], rows, signals)  # bar 0: high 10
    vb.fold([tick("X", 3, 20, 1)], rows, signals)  # bar 1 open, far above: no signal yet
    assert signals == [] and rows[-1][0] == 3_000_000_000 and rows[-1][1] == 3_000_000_000
    vb.fold([tick("X", 4, 21, 1)], rows, signals)  # bar 1 closes at 21 > 10
    assert [kind for _, kind, _, _ in signals] == [SignalKind.ENTRY_LONG]
    assert rows[-1][0] == 3_000_000_000


def test_no_breakout_until_lookback_bars_have_closed_before():
    bars = Bars(VolumeBreakout(params(lookback=2)))
    assert bars.close(10) == []
    assert bars.close(20) == []  # only one bar before it
    assert bars.close(30) == [SignalKind.ENTRY_LONG]  # 30 > max(10, 20)


def test_managed_exit_after_hold_bars_then_delayed_reentry_after_cooldown():
    vb = VolumeBreakout(params(lookback=2, hold_bars=2, cooldown_bars=1))
    bars = Bars(vb)
    bars.close(10)
    bars.close(11)
    assert bars.close(12) == [SignalKind.ENTRY_LONG]  # bar 2 enters
    assert bars.close(13) == []  # bar 3: held 1 (a same-side breakout changes nothing)
    assert bars.close(12.5) == [SignalKind.EXIT_LONG]  # bar 4: inside [12, 13], held 2 = hold_bars
    assert vb.position == Position.FLAT
    assert bars.close(20) == []  # bar 5: breakout, but cooldown: first eligible is 4 + 1 + 1 = 6
    assert bars.close(30) == [SignalKind.ENTRY_LONG]  # bar 6


def test_cooldown_zero_allows_entry_on_the_next_bar():
    bars = Bars(VolumeBreakout(params(lookback=1, hold_bars=1, cooldown_bars=0)))
    bars.close(10)
    assert bars.close(11) == [SignalKind.ENTRY_LONG]  # bar 1
    assert bars.close(12) == [SignalKind.EXIT_LONG]  # bar 2: held 1, even though 12 > 11
    assert bars.close(13) == [SignalKind.ENTRY_LONG]  # bar 3 = 2 + 0 + 1


def test_opposite_breakout_reverses_exit_first_without_cooldown():
    vb = VolumeBreakout(params(lookback=2, hold_bars=5, cooldown_bars=3))
    bars = Bars(vb)
    bars.close(10)
    bars.close(11)
    assert bars.close(12) == [SignalKind.ENTRY_LONG]
    assert bars.close(5) == [SignalKind.EXIT_LONG, SignalKind.ENTRY_SHORT]  # 5 < min(11, 12)
    assert vb.position == Position.SHORT and vb.entry_bar == 3
    # The hold count restarts at the reversal bar; closes inside the reference range
    # (or a same-side breakout: 6.5 < 7) change nothing until bar 8 = 3 + hold_bars.
    assert [bars.close(price) for price in (8, 6, 7, 7)] == [[], [], [], []]
    assert bars.close(6.5) == [SignalKind.EXIT_SHORT]
    assert vb.position == Position.FLAT


def test_short_breakout_below_the_lowest_low():
    bars = Bars(VolumeBreakout(params(lookback=2)))
    bars.close(10)
    bars.close(9)
    assert bars.close(8.5) == [SignalKind.ENTRY_SHORT]
