"""A database connection cut in the middle of an order call is an unknown outcome, resolved like a broker timeout.

The broker has already accepted the order when the connection that books it dies, so
the signal is never recorded `failed`: its intent keeps the capital reserved, starts
the unresolved clock, and reconciliation adopts the broker's order.
"""

from __future__ import annotations

import psycopg
import pytest
from channels.db import database_sync_to_async
from django.db import connection

from feeds.market import FeedData
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.ledger import ledger_check
from orders.models import AuditEvent, CapitalLedger, Order, OrderIntent, PaperOrder, Position
from orders.models.outcomes import SignalOutcome
from orders.paper_matching import PaperMatcher
from orders.reconciliation import reconcile_account
from orders.resolution import failure_outcome
from processor.signals import SignalKind
from tests.orders.factories import make_setup, make_signal, tick

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.needs_postgres]


class CutTheConnection:
    """Step hook: just before an order's lifecycle commits, the database ends that session.

    Runs in the database thread that is persisting; a second connection terminates its
    backend, as a database restart or a network cut would, so the commit fails.
    """

    def __init__(self, times: int) -> None:
        self.left = times
        self.cut = 0

    def __call__(self, step: str) -> None:
        if step != "before_commit" or self.left == 0:
            return
        self.left -= 1
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", [pid])
        self.cut += 1


def _executor(registry: BrokerRegistry, hook: CutTheConnection) -> TradeExecutor:
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        step_hook=hook,
    )


async def test_an_entry_cut_off_after_the_broker_took_it_stays_reserved_until_reconciliation_adopts_it(
    registry: BrokerRegistry,
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="1000000")
    # The group's persist and the one-account retry after it both lose their connection.
    hook = CutTheConnection(times=2)
    executor = _executor(registry, hook)
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["unknown"]
    assert hook.cut == 2

    def unknown() -> None:
        intent = OrderIntent.objects.get()
        assert intent.state == OrderIntent.State.PENDING and intent.unresolved_since is not None
        assert not Order.objects.exists() and PaperOrder.objects.count() == 1  # the broker has it
        assert CapitalLedger.objects.get(account_id=setup.account.pk).reserved_for_orders == intent.reserved > 0
        row = SignalOutcome.objects.get()
        assert row.outcome == "unknown" and "database connection lost" in row.reason
        assert AuditEvent.objects.filter(event="signal.unknown").exists()
        assert not AuditEvent.objects.filter(event="signal.failed").exists()

    await database_sync_to_async(unknown)()
    broker = registry.broker_for(account_id=setup.account.pk, venue="paper", mode="paper")
    result = await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
    assert result.corrections.get("Adopt") == 1

    def adopted() -> None:
        order = Order.objects.get()
        assert order.via_reconciliation and order.reserved == OrderIntent.objects.get().reserved
        assert SignalOutcome.objects.get().outcome == "placed"
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(adopted)()


async def test_an_exit_cut_off_after_the_broker_took_it_is_adopted_and_closes_the_position(
    registry: BrokerRegistry, executor: TradeExecutor, matcher: PaperMatcher
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="1000000")
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("100", "5"),)))

    cutting = _executor(registry, CutTheConnection(times=1))
    assert await cutting.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "100")) == ["unknown"]

    def exit_pending() -> None:
        intent = OrderIntent.objects.get(intent="EXIT")
        assert intent.state == OrderIntent.State.PENDING and intent.unresolved_since is not None
        assert SignalOutcome.objects.get(client_order_id=intent.client_order_id).outcome == "unknown"

    await database_sync_to_async(exit_pending)()
    broker = registry.broker_for(account_id=setup.account.pk, venue="paper", mode="paper")
    await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")
    await matcher.consume(FeedData("sim", (tick("100", "5"),)))
    await reconcile_account(account_id=setup.account.pk, broker=broker, prefix="ts")

    def closed() -> None:
        position = Position.objects.get(account=setup.account)
        assert position.state == Position.State.CLOSED and position.quantity == 0
        exit_intent = OrderIntent.objects.get(intent="EXIT")
        assert exit_intent.state == OrderIntent.State.PLACED
        assert SignalOutcome.objects.get(client_order_id=exit_intent.client_order_id).outcome == "placed"
        assert ledger_check(account_id=setup.account.pk).ok

    await database_sync_to_async(closed)()


async def test_a_connection_lost_before_anything_was_reserved_is_a_failure_with_nothing_held() -> None:
    from django.db import OperationalError

    outcome, reason = await failure_outcome(OperationalError("server closed the connection"), "ts-no-such-intent")
    assert outcome == "failed" and "nothing sent" in reason
    outcome, reason = await failure_outcome(ValueError("bug"), "ts-no-such-intent")
    assert outcome == "failed" and reason.startswith("unexpected error")
