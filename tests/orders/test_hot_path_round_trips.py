"""The entry path's shared round trips: COMMIT with the last writes, one plan read per batch, the kill
switches read with the locks, and the pushes of queued commits sent together."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from channels_redis.core import RedisChannelLayer  # type: ignore[import-untyped]
from django.conf import settings
from django.db import connection, transaction

from dashboard.manual_control import site_entry_gate_many
from dashboard.models import KillSwitch
from dashboard.selectors import account_scope, entries_halted_many
from orders.audit import audit_record_many
from orders.events import group_send_many
from orders.models import AuditEvent
from orders.round_trips import statements_batched
from orders.selectors import trade_settings_on_instrument, trade_settings_on_instruments
from tests.orders.factories import make_instrument, make_setup, make_strategy, statements_recorded


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_the_last_writes_carry_the_commit_and_the_transaction_is_committed_with_its_hooks() -> None:
    setup = make_setup()
    calls: list[str] = []
    committed: list[bool] = []
    with connection.execute_wrapper(statements_recorded(calls)):
        with transaction.atomic(durable=True), statements_batched(commit=True):
            audit_record_many([{"event": "test.commit", "account_id": setup.account.pk}])
            transaction.on_commit(lambda: committed.append(True))
        assert connection.get_autocommit()

    assert calls and calls[-1].endswith("; COMMIT")
    assert committed == [True]
    # Seen from another connection: committed, not merely written in this session.
    from psycopg import connect

    with connect(_url()) as other:
        row = other.execute("SELECT count(*) FROM orders_auditevent WHERE event = 'test.commit'").fetchone()
    assert row is not None and row[0] == 1


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_no_commit_travels_when_the_block_fails() -> None:
    setup = make_setup()
    calls: list[str] = []
    with (
        connection.execute_wrapper(statements_recorded(calls)),
        pytest.raises(RuntimeError),
        transaction.atomic(durable=True),
        statements_batched(commit=True),
    ):
        audit_record_many([{"event": "test.rollback", "account_id": setup.account.pk}])
        AuditEvent.objects.filter(event="test.rollback").count()
        raise RuntimeError("the block fails after its writes were sent")
    assert calls and not any("COMMIT" in sql for sql in calls)
    assert not AuditEvent.objects.filter(event="test.rollback").exists()


@pytest.mark.django_db
def test_inside_an_outer_transaction_the_commit_is_left_to_the_atomic_block() -> None:
    setup = make_setup()
    calls: list[str] = []
    with connection.execute_wrapper(statements_recorded(calls)), transaction.atomic():
        with transaction.atomic(), statements_batched(commit=True):
            audit_record_many([{"event": "test.nested", "account_id": setup.account.pk}])
        assert AuditEvent.objects.filter(event="test.nested").exists()
        assert not connection.get_autocommit()  # still in the outer transaction
    assert not any("COMMIT" in sql for sql in calls)


def _url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.mark.django_db
def test_the_plans_of_a_batch_are_one_read_equal_to_each_signals_own() -> None:
    first = make_setup(quantity="0.02")
    btc, eth = first.instrument, make_instrument(symbol="ETHUSDT")
    make_setup(strategy=first.strategy, instrument=btc, quantity="0.03")
    other = make_strategy()
    make_setup(strategy=other, instrument=eth)
    keys = [
        (first.strategy.pk, "sim", btc.venue_symbol),
        (other.pk, "sim", eth.venue_symbol),
        (other.pk, "sim", "NOSUCH"),
        (first.strategy.pk, "sim", btc.venue_symbol),
    ]
    calls: list[str] = []
    with connection.execute_wrapper(statements_recorded(calls)):
        together = trade_settings_on_instruments(keys)
    one_by_one = [trade_settings_on_instrument(strategy_id=s, feed=f, venue_symbol=v) for s, f, v in keys]

    assert together == one_by_one
    assert [len(settings_list) for _, settings_list in together] == [2, 1, 0, 2]
    if connection.vendor == "postgresql":
        assert len(calls) == 1


@pytest.mark.django_db
def test_the_site_gate_from_its_statement_answers_as_the_gate_itself() -> None:
    halted, free = make_setup(), make_setup()
    KillSwitch.objects.create(
        scope=account_scope(halted.account.pk), account=halted.account, engaged=True, reason="operator"
    )
    ids = [halted.account.pk, free.account.pk]
    sql, params = site_entry_gate_many.statement(ids)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        answer = site_entry_gate_many.from_rows(ids, cursor.fetchall())
    assert answer == site_entry_gate_many(ids)
    assert answer[free.account.pk] is None
    assert answer[halted.account.pk] == entries_halted_many(account_ids=ids)[halted.account.pk]
    assert "operator" in (answer[halted.account.pk] or "")


@pytest.mark.needs_redis
def test_pushes_sent_together_reach_each_member_in_order_as_group_sends_do() -> None:
    layer = RedisChannelLayer(
        hosts=[settings.REDIS_URL], prefix=f"asgi.test.{uuid.uuid4().hex[:8]}", capacity=100, expiry=30
    )

    async def scenario() -> tuple[list[Any], list[Any], list[Any]]:
        alice, bob, carol = await layer.new_channel(), await layer.new_channel(), await layer.new_channel()
        await layer.group_add("user.1", alice)
        await layer.group_add("user.1", bob)
        await layer.group_add("user.2", carol)
        messages = [
            ("user.1", {"type": "t", "n": 1}),
            ("user.2", {"type": "t", "n": 2}),
            ("user.1", {"type": "t", "n": 3}),
            ("user.3", {"type": "t", "n": 4}),  # nobody listening: nothing sent, no error
            ("user.1", {"type": "t", "n": 5}),
        ]
        await group_send_many(layer, messages)
        got = []
        for channel, count in ((alice, 3), (bob, 3), (carol, 1)):
            got.append([(await layer.receive(channel))["n"] for _ in range(count)])
        try:
            await asyncio.wait_for(layer.receive(alice), timeout=0.3)
            extra: list[Any] = ["unexpected"]
        except TimeoutError:
            extra = []
        await layer.flush()
        return got[0], got[1], got[2] + extra

    alice_got, bob_got, carol_got = asyncio.run(scenario())
    assert alice_got == [1, 3, 5]
    assert bob_got == [1, 3, 5]
    assert carol_got == [2]
