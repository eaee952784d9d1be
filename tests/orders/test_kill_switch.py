"""Kill switches stop new entries (account or global) and never stop exits."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from dashboard.selectors import entries_halted
from dashboard.services import kill_switch_set
from feeds.market import FeedData
from orders.executor import ExecutorConfig, TradeExecutor
from orders.models import AuditEvent, PaperOrder
from orders.paper_matching import PaperMatcher
from processor.signals import SignalKind
from tests.orders.factories import make_setup, make_signal, tick
from tradingsite.runtime.compose import build_hubs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gated_executor(registry) -> TradeExecutor:
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
        entry_gate=lambda account_id: entries_halted(account_id=account_id),
    )


def _staff():
    return get_user_model().objects.create_user("ops", password="x", is_staff=True, is_superuser=True)


@pytest.mark.parametrize("scope", ["account", "global"])
async def test_an_engaged_switch_halts_entries_with_an_audit_and_no_broker_order(
    gated_executor: TradeExecutor, scope: str
) -> None:
    setup = await database_sync_to_async(make_setup)()
    # The account's owner flips its own switch; staff flip the global one.
    actor = (
        await database_sync_to_async(lambda: setup.account.owner)()
        if scope == "account"
        else await database_sync_to_async(_staff)()
    )
    await database_sync_to_async(kill_switch_set)(
        actor=actor, account_id=setup.account.pk if scope == "account" else None, engaged=True, reason="desk closed"
    )
    assert await gated_executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG)) == ["halted"]
    assert await database_sync_to_async(PaperOrder.objects.count)() == 0
    audit = await database_sync_to_async(lambda: AuditEvent.objects.get(event="signal.halted"))()
    assert "kill switch engaged: desk closed" in audit.message

    await database_sync_to_async(kill_switch_set)(
        actor=actor, account_id=setup.account.pk if scope == "account" else None, engaged=False
    )
    assert await gated_executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50001")) == ["placed"]


async def test_exits_still_run_while_entries_are_halted(gated_executor: TradeExecutor, matcher: PaperMatcher) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="0.01")
    assert await gated_executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "50000")) == ["placed"]
    await matcher.consume(FeedData("sim", (tick("50000", "1"),)))
    staff = await database_sync_to_async(_staff)()
    await database_sync_to_async(kill_switch_set)(actor=staff, account_id=None, engaged=True)
    assert await gated_executor.handle(make_signal(setup.strategy, SignalKind.EXIT_LONG, "50100")) == ["placed"]


async def test_the_runtime_hands_the_kill_switches_to_the_trade_executor() -> None:
    gate = build_hubs().controls.entry_gate
    setup = await database_sync_to_async(make_setup)()
    assert await database_sync_to_async(gate)(setup.account.pk) is None
    owner = await database_sync_to_async(lambda: setup.account.owner)()
    await database_sync_to_async(kill_switch_set)(actor=owner, account_id=setup.account.pk, engaged=True)
    assert "account kill switch engaged" in await database_sync_to_async(gate)(setup.account.pk)
