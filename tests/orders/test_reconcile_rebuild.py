"""The restart rebuild always completes before trading resumes.

A reconcile lease left by a killed process is taken over once it expires; an account
the rebuild cannot vouch for stays halted for entries, with the reason on the
dashboard's kill switch, until a person releases it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.utils import timezone

from core.health import Status
from core.runtime.core import RuntimeContext
from dashboard.halts import entries_halt_by_reconciliation
from dashboard.models import KillSwitch
from dashboard.selectors import entries_halted
from dashboard.services import kill_switch_set
from orders.brokers.base import OrderRequest
from orders.brokers.paper import PaperBroker
from orders.lifecycle import intent_create
from orders.locks import RECONCILE_SCOPE
from orders.models import CapitalLedger, EntryLock, Order, OrderIntent
from orders.startup import RECONCILE_COMPONENT, EntryControls, OrdersHubs, orders_startup_tasks
from tests.orders.factories import make_setup, market_entry_spec

pytestmark = pytest.mark.django_db(transaction=True)


def _rebuild_task():  # type: ignore[no-untyped-def]
    controls = EntryControls(entries_halt=entries_halt_by_reconciliation)
    [task] = [t for t in orders_startup_tasks(OrdersHubs(), controls=controls) if t.name == "orders-restart-rebuild"]
    return task


def _context() -> RuntimeContext:
    return RuntimeContext()


def _lease_left_by_a_killed_process(account_id: int, *, expires_in_s: float) -> None:
    now = timezone.now()
    EntryLock.objects.create(
        account_id=account_id,
        scope=RECONCILE_SCOPE,
        owner="killed-process",
        acquired_at=now - timedelta(seconds=30),
        expires_at=now + timedelta(seconds=expires_in_s),
    )


async def _crash_after_place(setup) -> str:  # type: ignore[no-untyped-def]
    """An entry the broker took whose lifecycle was never persisted: the rebuild must adopt it."""
    spec = market_entry_spec(setup, f"ts-{setup.account.pk}-crashed000000001")
    await database_sync_to_async(intent_create)(spec=spec)
    await PaperBroker(account_key=str(setup.account.pk)).place_order(
        OrderRequest(spec.client_order_id, "BTCUSDT", "BUY", "MARKET", spec.quantity, None)
    )
    return spec.client_order_id


async def test_a_lease_left_by_a_killed_process_is_taken_over_once_it_expires(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ORDERS_LOCK_TTL_S = 2.0
    setup = await database_sync_to_async(make_setup)()
    client_id = await _crash_after_place(setup)
    await database_sync_to_async(_lease_left_by_a_killed_process)(setup.account.pk, expires_in_s=1.0)
    ctx = _context()

    await _rebuild_task().run(ctx)

    # The rebuild waited for the lease, reconciled, and only then returned.
    assert await database_sync_to_async(
        Order.objects.filter(client_order_id=client_id, via_reconciliation=True).exists
    )()
    health = ctx.health.get(RECONCILE_COMPONENT)
    assert health.status == Status.HEALTHY, health.reason
    assert "1 corrections" in health.reason
    lease = await database_sync_to_async(EntryLock.objects.get)(account_id=setup.account.pk, scope=RECONCILE_SCOPE)
    assert lease.owner == ""  # released by the rebuild that took it over
    assert await database_sync_to_async(entries_halted)(account_id=setup.account.pk) is None


async def test_an_account_whose_rebuild_could_not_run_stays_halted_until_a_person_releases_it(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ORDERS_LOCK_TTL_S = 0.5
    setup = await database_sync_to_async(make_setup)(username="owner1")
    # A holder that keeps its lease (a live process stuck in a pass) outlasts the wait.
    await database_sync_to_async(_lease_left_by_a_killed_process)(setup.account.pk, expires_in_s=3600)
    ctx = _context()

    await _rebuild_task().run(ctx)

    health = ctx.health.get(RECONCILE_COMPONENT)
    assert health.status == Status.DEGRADED
    assert f"entries halted on accounts {setup.account.pk}" in health.reason
    reason = await database_sync_to_async(entries_halted)(account_id=setup.account.pk)
    assert reason is not None and "restart rebuild did not complete" in reason

    def shown_on_the_dashboard() -> None:
        client = Client()
        client.force_login(setup.account.owner)
        page = client.get("/").content.decode()
        assert "restart rebuild did not complete" in page
        assert 'class="badge badge-bad"' in page

    await database_sync_to_async(shown_on_the_dashboard)()

    # It stays halted across passes that now succeed, until a person releases it.
    await database_sync_to_async(EntryLock.objects.filter(scope=RECONCILE_SCOPE).delete)()
    await _rebuild_task().run(_context())
    assert await database_sync_to_async(entries_halted)(account_id=setup.account.pk) is not None
    await database_sync_to_async(kill_switch_set)(actor=setup.account.owner, account_id=setup.account.pk, engaged=False)
    assert await database_sync_to_async(entries_halted)(account_id=setup.account.pk) is None


async def test_an_account_with_a_broken_ledger_is_halted_with_the_invariant_as_reason() -> None:
    setup = await database_sync_to_async(make_setup)()
    # A write that bypassed the ledger service: the journal no longer explains the field.
    await database_sync_to_async(CapitalLedger.objects.filter(account=setup.account).update)(reserved_for_orders=5)
    ctx = _context()

    await _rebuild_task().run(ctx)

    assert ctx.health.get(RECONCILE_COMPONENT).status == Status.DEGRADED
    switch = await database_sync_to_async(KillSwitch.objects.get)(account=setup.account)
    assert switch.engaged and "capital invariant reserved_for_orders" in switch.reason


async def test_a_pending_intent_whose_entry_lease_a_killed_process_holds_is_still_resolved(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ORDERS_LOCK_TTL_S = 2.0
    setup = await database_sync_to_async(make_setup)()
    client_id = await _crash_after_place(setup)
    now = timezone.now()
    await database_sync_to_async(EntryLock.objects.create)(
        account_id=setup.account.pk,
        scope=f"entry:{setup.instrument.pk}",
        owner="killed-process",
        acquired_at=now - timedelta(seconds=30),
        expires_at=now + timedelta(seconds=1),
    )

    await _rebuild_task().run(_context())

    intent = await database_sync_to_async(OrderIntent.objects.get)(client_order_id=client_id)
    assert intent.state == OrderIntent.State.PLACED
