"""Recorded ticks from the database as replay batches, for the backtest command and the browser runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from feeds.market import FeedData

RECORDED_WINDOW_NS = 3_600 * 1_000_000_000  # recorded ticks are read an hour at a time


class TickSourceError(ValueError):
    """The recorded ticks asked for cannot be read (an unknown instrument, a backwards range)."""


def recorded_tick_count(feed: str, symbols: Sequence[str], start_ns: int, end_ns: int) -> int:
    """How many recorded ticks the range holds: the total a run's progress counts towards."""
    from feeds.recording.tick_selectors import InstrumentNotFound, find_instrument, ticks_in_order

    total = 0
    for symbol in symbols:
        try:
            instrument = find_instrument(symbol, feed)
        except InstrumentNotFound as exc:
            raise TickSourceError(str(exc)) from None
        total += ticks_in_order(instrument, start_ns, end_ns).order_by().count()
    return total


def recorded_batches(
    feed: str,
    symbols: Sequence[str],
    start_ns: int,
    end_ns: int,
    batch_ticks: int,
    *,
    on_batch: Callable[[int], None] | None = None,
) -> Iterator[FeedData]:
    """Yield the recorded ticks of `symbols` on `feed` in [start_ns, end_ns), merged in exchange-time order.

    `on_batch(ticks)` is called with each batch's size before it is yielded (a progress hook).
    """
    from feeds.recording.tick_history import recorded_ticks  # the recorder's reader
    from feeds.recording.tick_selectors import InstrumentNotFound

    if end_ns <= start_ns:
        raise TickSourceError("the range must end after it starts")
    for window_start in range(start_ns, end_ns, RECORDED_WINDOW_NS):
        window_end = min(window_start + RECORDED_WINDOW_NS, end_ns)
        ticks = []
        for symbol in symbols:
            try:
                ticks.extend(recorded_ticks(feed, symbol, window_start, window_end))
            except InstrumentNotFound as exc:
                raise TickSourceError(str(exc)) from None
        ticks.sort(key=lambda tick: tick.ts_event)
        for start in range(0, len(ticks), batch_ticks):
            batch = tuple(ticks[start : start + batch_ticks])
            if on_batch is not None:
                on_batch(len(batch))
            yield FeedData(feed, batch)


_END = object()


def read_in_thread(batches: Callable[[], Iterator[FeedData]], *, depth: int = 4) -> Iterator[FeedData]:
    """Yield what `batches()` yields, read by a thread of its own that closes its database connection.

    The replay iterates its batches inside an event loop, where Django refuses ORM
    queries; the recorded ticks are therefore read in a plain thread, at most `depth`
    batches ahead. An error of the reader is raised here, in the consumer.
    """
    import queue
    import threading

    from django.db import connection

    handoff: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for batch in batches():
                if not put(batch):
                    return
            put(_END)
        except BaseException as exc:  # handed to the consumer, which raises it
            put(exc)
        finally:
            connection.close()

    reader = threading.Thread(target=read, name="backtest-tick-reader", daemon=True)
    reader.start()
    try:
        while True:
            item = handoff.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, FeedData)
            yield item
    finally:
        stop.set()
        reader.join(timeout=5)
