"""The signals-only fold (no output rows, ema's skip of ticks that cannot cross) against the general path."""

from __future__ import annotations

from typing import Any

import pytest

from backtesting.tape_replay import fold_tape, run_tape_backtest
from backtesting.tick_tape import read_tick_tape
from processor.backtest import BACKTEST_FEED, JsonLinesWriter
from processor.strategies import clean_params
from tests.backtesting.test_tick_tape import random_csv

EMA_PARAMS = [
    {"timeframe_s": 5, "fast": 2, "slow": 5},
    {"timeframe_s": 1, "fast": 3, "slow": 8, "long_only": True},
    {"timeframe_s": 10, "fast": 9, "slow": 10},
    {"timeframe_s": 3, "fast": 2, "slow": 6, "bucket_close_only": True},
]
BREAKOUT_PARAMS = [
    {"bar_volume": "6", "lookback": 3, "hold_bars": 2, "cooldown_bars": 1},
    {"bar_volume": "2.5", "lookback": 1, "hold_bars": 5, "cooldown_bars": 0},
]


def _signals(kind: str, params: dict[str, Any], tape: Any, only_signals: bool) -> tuple[list[tuple[Any, ...]], int]:
    folded = fold_tape(kind=kind, params=clean_params(kind, params), tape=tape, only_signals=only_signals)
    return [
        (s.index, s.rank, s.signal.symbol, s.signal.kind, s.signal.price, s.signal.occurrence_ns)
        for s in folded.signals
    ], folded.outputs


@pytest.mark.parametrize(
    ("kind", "params"), [("ema", p) for p in EMA_PARAMS] + [("volume_breakout", p) for p in BREAKOUT_PARAMS]
)
@pytest.mark.parametrize("symbols", [("BTC",), ("ETH", "BTC", "SOL")])
def test_the_signals_only_fold_emits_what_the_general_fold_emits(tmp_path, kind, params, symbols) -> None:
    tape = read_tick_tape(random_csv(tmp_path / "t.csv", seed=21, count=6_000, symbols=symbols), feed=BACKTEST_FEED)
    general, general_outputs = _signals(kind, params, tape, only_signals=False)
    fast, fast_outputs = _signals(kind, params, tape, only_signals=True)
    assert fast == general and fast_outputs == general_outputs == len(tape)
    assert general  # the comparison means something


def test_a_tape_backtest_refuses_a_writer_of_output_lines(tmp_path) -> None:
    tape = read_tick_tape(random_csv(tmp_path / "t.csv", seed=3, count=100, symbols=("BTC",)), feed=BACKTEST_FEED)
    writer = JsonLinesWriter(lambda line: None, kind="ema", signals_only=False)
    with pytest.raises(ValueError, match="signals_only"):
        run_tape_backtest(kind="ema", params=EMA_PARAMS[0], tape=tape, writer=writer)
    with pytest.raises(ValueError, match="signals-only"):
        writer.signal_lines([])
