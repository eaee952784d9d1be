"""The strategy guide's example: the file docs/processor.md shows, folded, validated and backtested."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from feeds.market import FeedData
from processor.backtest import BACKTEST_FEED, JsonLinesWriter, run_backtest
from processor.signals import Position, SignalKind
from processor.strategies import clean_params, register_strategy, strategy_class, unregister_strategy
from tests.processor.factories import tick
from tests.processor.momentum_example import Momentum

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "processor.md"
EXAMPLE = Path(__file__).with_name("momentum_example.py")


@pytest.fixture
def momentum() -> Iterator[type[Momentum]]:
    register_strategy(Momentum)  # registered on import already; again is a no-op
    yield Momentum
    unregister_strategy(Momentum.kind)


def test_the_guide_shows_the_tested_file_verbatim() -> None:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)
    assert EXAMPLE.read_text() in blocks


def test_fold_appends_a_row_per_accepted_tick_and_signals_pointing_at_their_row() -> None:
    strategy = Momentum({"lookback": 2})
    rows: list = []
    signals: list = []
    prices = [100, 101, 102, 101, 99, 98]
    strategy.fold([tick("X", n + 1, price) for n, price in enumerate(prices)], rows, signals)
    assert len(rows) == 6
    assert [row[2] for row in rows] == [tick("X", 0, p).price for p in (100, 100, 100, 101, 102, 101)]
    # Tick 3 (102) is above 100 two ticks before; tick 5 (99) is below 102.
    assert [(index, kind) for index, kind, _, _ in signals] == [
        (2, SignalKind.ENTRY_LONG),
        (4, SignalKind.EXIT_LONG),
        (4, SignalKind.ENTRY_SHORT),
    ]
    assert strategy.position == Position.SHORT


def test_an_out_of_order_tick_is_skipped_and_counted() -> None:
    strategy = Momentum({"lookback": 1})
    rows: list = []
    strategy.fold([tick("X", 2, 100), tick("X", 1, 200), tick("X", 3, 101)], rows, [])
    assert len(rows) == 2 and strategy.skipped_out_of_order == 1


def test_warming_up_never_trades_and_the_next_live_tick_can() -> None:
    strategy = Momentum({"lookback": 1, "long_only": True})
    strategy.warm([tick("X", 1, 100), tick("X", 2, 110)])
    assert strategy.position == Position.FLAT
    signals: list = []
    strategy.fold([tick("X", 3, 120)], [], signals)
    assert [kind for _, kind, _, _ in signals] == [SignalKind.ENTRY_LONG]
    signals.clear()
    strategy.fold([tick("X", 4, 90)], [], signals)
    assert [kind for _, kind, _, _ in signals] == [SignalKind.EXIT_LONG]  # long_only: no short entry


def test_params_are_validated_by_the_declared_form(momentum: type[Momentum]) -> None:
    assert strategy_class("momentum") is momentum
    assert clean_params("momentum", {"lookback": "3"}) == {"lookback": 3, "long_only": False}
    with pytest.raises(ValidationError) as caught:
        clean_params("momentum", {"lookback": 0, "extra": 1})
    assert set(caught.value.message_dict) == {"lookback", "__all__"}


async def test_the_backtest_runs_it_through_the_live_processor(momentum: type[Momentum]) -> None:
    lines: list[str] = []
    writer = JsonLinesWriter(lines.append, kind="momentum")
    ticks = tuple(tick("X", n + 1, price) for n, price in enumerate([100, 101, 99.5]))
    summary = await run_backtest(
        kind="momentum",
        params={"lookback": 1},
        batches=[FeedData(BACKTEST_FEED, ticks)],
        writer=writer,
    )
    text = "".join(lines)
    assert summary.ticks == 3 and summary.signals == 3
    assert '"values":{"reference":"101"}' in text  # fixed-point outputs are exact decimal strings
    assert text.index('"ENTRY_LONG"') < text.index('"EXIT_LONG"') < text.index('"ENTRY_SHORT"')
