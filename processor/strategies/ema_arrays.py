"""The `ema` fold over whole int64 columns, with numpy: the same arithmetic as the tick loop.

A backtest's tape hands a strategy a million ticks at once; the tick loop in
`EmaCrossover.fold_columns` spends most of its time on Python bookkeeping per tick.
Here each step of that loop becomes a pass over the columns:

- a tick older than the latest accepted one is skipped: the running maximum of the times;
- a bucket rolls at the first accepted tick whose bucket (floor of time / timeframe) differs
  from the previous accepted tick's, and closes at that previous tick's price;
- the closed-bucket EMAs are a recurrence over bucket closes only (one Python step per
  bucket, in the loop's exact operation order);
- every tick's live EMAs are `alpha * price + (1 - alpha) * closed EMA`, elementwise in
  float64 with the same two products and one sum the loop computes, so each value is the
  same IEEE double bit for bit;
- the position follows the sign of fast - slow where a tick decides; a signal is emitted
  where the wanted position differs from the one before it.

The columns are folded in blocks, the state carried from one to the next exactly as
between calls. The state read and written is the instance's, so calls on arrays and on
lists can follow one another. The result (rows, signals, state, skipped count) equals the tick loop's; a
test compares both on random tapes split into calls at random points.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from processor.outputs import OutputRow
from processor.signals import Position, transition
from processor.strategies.base import SignalRow
from processor.strategies.ema_state import EmaState, closed_emas

# Ticks per pass: a block's temporary arrays stay in the CPU cache and in memory the
# allocator already holds; a whole million-tick column per pass spends more time on fresh
# pages than on arithmetic (measured: about 3x slower).
BLOCK_TICKS = 16_384
_POSITION = {int(p): p for p in Position}
_TRANSITIONS = {(int(old), int(new)): transition(old, new) for old in Position for new in Position}


def fold_ema_arrays(
    logic: EmaState,
    times: Any,
    prices: Any,
    rows: list[OutputRow],
    signals: list[SignalRow],
    *,
    trading: bool,
    only_signal_outputs: bool,
    scale: float,
) -> None:
    """Fold int64 arrays of exchange times (ns) and fixed-point prices into `logic`'s state."""
    first_index = len(rows)  # the row index of the first accepted tick
    for start in range(0, len(times), BLOCK_TICKS):
        end = start + BLOCK_TICKS
        first_index += _fold_block(
            logic, times[start:end], prices[start:end], rows, signals, trading, only_signal_outputs, scale, first_index
        )


def _fold_block(
    logic: EmaState,
    times: Any,
    prices: Any,
    rows: list[OutputRow],
    signals: list[SignalRow],
    trading: bool,
    only_signal_outputs: bool,
    scale: float,
    base: int,
) -> int:
    """Fold one block; returns how many of its ticks were accepted (`base`: the first one's row index)."""
    count = len(times)
    if count == 0:
        return 0
    previous = np.empty(count, dtype=np.int64)
    previous[0] = logic.last_ts_ns
    if count > 1:
        np.maximum.accumulate(times[:-1], out=previous[1:])
        np.maximum(previous[1:], logic.last_ts_ns, out=previous[1:])
    accepted = times >= previous
    if accepted.all():
        ts, px = times, prices
    else:
        ts, px = times[accepted], prices[accepted]
    logic.skipped_out_of_order += count - len(ts)
    if len(ts) == 0:
        return 0
    timeframe = logic.timeframe_ns
    bucket = ts // timeframe  # floor division, as the loop's ts - ts % timeframe
    roll = np.empty(len(ts), dtype=bool)
    roll[0] = ts[0] >= logic.bucket_end_ns
    np.not_equal(bucket[1:], bucket[:-1], out=roll[1:])
    rolled = roll.copy()  # a roll closes a bucket when there was a price before it
    if logic.close is None:
        rolled[0] = False
    live = px.astype(np.float64) / scale

    # The closed-bucket EMAs: a short recurrence over bucket closes, in the loop's order.
    at_rolls = np.flatnonzero(rolled)
    closes = live[np.maximum(at_rolls - 1, 0)].tolist()
    if len(at_rolls) and at_rolls[0] == 0:
        closes[0] = logic.close
    af, as_ = logic.alpha_fast, logic.alpha_slow
    bf, bs = 1 - af, 1 - as_
    cf, cs = logic.closed_fast, logic.closed_slow
    closed = logic.closed_buckets
    fast_after, slow_after = [cf], [cs]
    for close in closes:
        cf, cs = closed_emas(closed, close, cf, cs, af, bf, as_, bs)
        closed += 1
        fast_after.append(cf)
        slow_after.append(cs)
    closes_before = np.cumsum(rolled)  # per tick: buckets closed in this call up to it
    tick_cf = np.asarray(fast_after)[closes_before]
    tick_cs = np.asarray(slow_after)[closes_before]
    closed_at = closes_before + logic.closed_buckets
    warm = closed_at > 0
    fast = np.where(warm, af * live + bf * tick_cf, live)
    slow = np.where(warm, as_ * live + bs * tick_cs, live)
    if not only_signal_outputs:
        starts = bucket * timeframe
        rows.extend(zip(starts.tolist(), ts.tolist(), fast.tolist(), slow.tolist(), strict=True))

    position = int(logic.position)
    if trading:
        decides = closed_at >= logic.slow_n
        if logic.bucket_close_only:
            decides &= rolled
            fast, slow = tick_cf, tick_cs  # the decision is the closed buckets', not the tick's
        above, below = fast > slow, fast < slow
        deciding = np.flatnonzero(decides & (above | below))  # equal: the position stays
        short = 0 if logic.long_only else -1
        wanted = np.where(above[deciding], 1, short)
        before = np.empty(len(wanted), dtype=wanted.dtype)
        if len(wanted):
            before[0] = position
            before[1:] = wanted[:-1]
            changes = np.flatnonzero(wanted != before)
            at = deciding[changes]
            for index, old, new, price, stamp in zip(
                (at + base).tolist(),
                before[changes].tolist(),
                wanted[changes].tolist(),
                px[at].tolist(),
                ts[at].tolist(),
                strict=True,
            ):
                for kind in _TRANSITIONS[old, new]:
                    signals.append((index, kind, price, stamp))
            position = int(wanted[-1])

    rolls = np.flatnonzero(roll)
    if len(rolls):
        logic.bucket_start_ns = int(bucket[rolls[-1]]) * timeframe
        logic.bucket_end_ns = logic.bucket_start_ns + timeframe
    logic.close = float(int(px[-1])) / scale
    logic.closed_buckets = closed
    logic.closed_fast, logic.closed_slow = cf, cs
    logic.last_ts_ns = int(ts[-1])
    logic.position = _POSITION[position]
    return len(ts)
