"""One progress bar for the long commands (imports, backtests), on standard error.

A bar only where a person watches: when the stream is not a terminal (CI, a pipe, a
log file) the bar stays silent and the command's summary line says what happened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn


@contextmanager
def progress_bar(
    label: str,
    *,
    total: int | Callable[[], int],
    enabled: bool = True,
    stream: TextIO | None = None,
    unit_bytes: bool = True,
    every: int = 1 << 16,
) -> Iterator[Callable[[int], None]]:
    """Yield `advance(n)`, which moves the bar `n` units of `total` (bytes by default).

    `total` may be a function: it is called only when the bar is drawn (a count that costs a
    read of the input is not paid for a pipe or a log file). The bar is redrawn once `every`
    units have gathered (1 for slow units such as sweep points).
    """
    console = Console(file=stream, stderr=stream is None)
    if not enabled or not console.is_terminal:
        yield lambda n: None
        return
    if callable(total):
        total = total()
    columns = [TextColumn(label), BarColumn(), DownloadColumn() if unit_bytes else TextColumn("{task.completed}")]
    with Progress(*columns, TimeRemainingColumn(), console=console, transient=True) as progress:
        task = progress.add_task(label, total=total)
        pending = 0

        def advance(n: int) -> None:
            # Rich redraws on every call; batching keeps a tight loop's cost flat.
            nonlocal pending
            pending += n
            if pending >= every:
                progress.advance(task, pending)
                pending = 0

        yield advance
        progress.advance(task, pending)
