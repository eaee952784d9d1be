"""Exit sizing reads the open quantity and the working exits as one state, so an exit never oversells."""

from __future__ import annotations

import threading

import pytest
from channels.db import database_sync_to_async
from django.db import connection

from feeds.market import FeedData, parse_fixed
from orders import lifecycle
from orders.brokers.paper import PaperFees, paper_match
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import Fill, Order, OrderIntent, PaperOrder, Position
from orders.paper_matching import PaperMatcher
from processor.signals import SignalKind
from tests.helpers import eventually
from tests.orders.factories import make_setup, make_signal, tick

pytestmark = pytest.mark.django_db(transaction=True)


class FillBetweenReads:
    """Step hook: when the exit has read the position, the exchange fills the working exit and books it, concurrently.

    The fill is booked from a second thread (its own connection). The hook returns once
    that booking has either finished or is waiting on a row lock: either way the
    exit's second read comes after the fill had every chance to land.
    """

    def __init__(self, account_id: int) -> None:
        self.account_id = account_id
        self.thread: threading.Thread | None = None
        self.backend_pid: int | None = None
        self.booked = threading.Event()

    def __call__(self, step: str) -> None:
        if step != "exit_position_read" or self.thread is not None:
            return
        ready = threading.Event()
        self.thread = threading.Thread(target=self._fill, args=(ready,))
        self.thread.start()
        assert ready.wait(10)

        def landed_or_blocked() -> bool:
            if self.booked.is_set():
                return True
            with connection.cursor() as cursor:
                cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [self.backend_pid])
                row = cursor.fetchone()
            return row is not None and row[0] == "Lock"

        eventually(landed_or_blocked, timeout_s=10, interval_s=0.01)

    def _fill(self, ready: threading.Event) -> None:
        try:
            fills = paper_match([tick("100", "0.4")], fees=PaperFees())
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.backend_pid = cursor.fetchone()[0]
            ready.set()
            for _, fill in fills:
                lifecycle.lifecycle_apply_fill(account_id=self.account_id, fill=fill)
            self.booked.set()
        finally:
            ready.set()
            connection.close()


@pytest.mark.needs_postgres
async def test_a_fill_landing_between_the_sizing_reads_never_oversells(
    registry: BrokerRegistry, executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="1000000")
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("100", "5"),)))
    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "100")) == ["placed"]

    # A second exit signal (the strategy repeats itself) while the first exit works and fills.
    hook = FillBetweenReads(setup.account.pk)
    racing = TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        step_hook=hook,
    )
    assert await racing.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "100")) == ["already_closing"]
    assert hook.thread is not None
    hook.thread.join(10)
    assert hook.booked.is_set()

    await matcher.consume(FeedData("sim", (tick("100", "5"),)))

    def check() -> None:
        position = Position.objects.get(account=setup.account)
        assert position.state == Position.State.CLOSED and position.quantity == 0
        assert OrderIntent.objects.filter(intent="EXIT").count() == 1
        sold = sum(PaperOrder.objects.filter(side="SELL").values_list("filled_quantity", flat=True))
        assert sold == parse_fixed("1")  # the broker holds no exposure the site does not
        booked = sum(Fill.objects.filter(order__intent="EXIT").values_list("quantity", flat=True))
        assert booked == parse_fixed("1")
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(check)()


async def test_an_exit_after_a_partly_filled_exit_ended_closes_exactly_the_rest(
    registry: BrokerRegistry, executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="1000000")
    await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100"))
    await matcher.consume(FeedData("sim", (tick("100", "5"),)))
    await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "100"))
    await matcher.consume(FeedData("sim", (tick("100", "0.3"),)))
    # The exchange cancels the rest of the first exit.
    first_exit = await database_sync_to_async(Order.objects.get)(intent="EXIT")
    broker = registry.broker_for(account_id=setup.account.pk, venue="paper", mode="paper")
    ended = await broker.cancel_order(
        client_order_id=first_exit.client_order_id, exchange_order_id=first_exit.exchange_order_id, symbol="BTCUSDT"
    )
    await database_sync_to_async(lifecycle.lifecycle_order_update)(account_id=setup.account.pk, broker_order=ended)

    assert await executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "100")) == ["placed"]
    second_exit = await database_sync_to_async(Order.objects.exclude(pk=first_exit.pk).get)(intent="EXIT")
    assert second_exit.quantity == parse_fixed("0.7")
