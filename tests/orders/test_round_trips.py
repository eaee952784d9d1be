"""Statements sent together: in order, each on its own snapshot, one round trip on PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import IntegrityError, close_old_connections, connection, transaction

from core.fixed_point import SCALE
from orders import ledger as ledger_service
from orders.audit import audit_record_many
from orders.lifecycle import _intent_insert
from orders.models import AuditEvent, CapitalLedger, OrderIntent
from orders.round_trips import execute_later, fetch_together, statements_batched
from orders.rows import table
from orders.selectors import entry_states_from_rows, entry_states_statement
from tests.orders.factories import make_setup, market_entry_spec, statements_recorded


@pytest.mark.django_db
def test_a_write_sent_later_is_in_place_before_the_next_statement_reads() -> None:
    setup = make_setup()
    calls: list[str] = []
    with connection.execute_wrapper(statements_recorded(calls)), transaction.atomic(), statements_batched():
        audit_record_many([{"event": "test.later", "account_id": setup.account.pk, "message": "sent later"}])
        seen = AuditEvent.objects.filter(event="test.later").count()

    assert seen == 1
    if connection.vendor == "postgresql":
        # The insert travelled with the read: no round trip of its own.
        assert not [sql for sql in calls if sql.startswith("INSERT")]


@pytest.mark.django_db
def test_a_later_write_that_fails_fails_its_transaction() -> None:
    setup = make_setup(capital="100")
    ledger = table(CapitalLedger)
    with pytest.raises(IntegrityError), transaction.atomic(), statements_batched():
        # More than the account has: the ledger's CHECK constraint refuses it.
        execute_later(
            f"UPDATE {ledger} SET reserved_for_orders = reserved_for_orders + %s WHERE account_id = %s",
            [1000 * SCALE, setup.account.pk],
        )
        CapitalLedger.objects.filter(account=setup.account).count()
    assert CapitalLedger.objects.get(account=setup.account).reserved_for_orders == 0


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_a_state_read_sent_with_the_lock_sees_the_entry_committed_while_the_lock_was_waited_for() -> None:
    setup = make_setup()
    account_id, instrument_id = setup.account.pk, setup.instrument.pk
    holder = market_entry_spec(setup, f"ts-{account_id}-holder00000000001")
    locked = threading.Event()
    failure: list[BaseException] = []

    def hold_the_lock_then_enter() -> None:
        try:
            with transaction.atomic(durable=True):
                ledger = ledger_service.ledger_lock(account_id=account_id)
                locked.set()
                time.sleep(0.5)  # the other connection's statement waits for the lock meanwhile
                _intent_insert(ledger, holder)
        except BaseException as exc:  # surfaced in the test's thread
            failure.append(exc)
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=hold_the_lock_then_enter)
    thread.start()
    assert locked.wait(timeout=10)
    entries = [(f"ts-{account_id}-second00000000001", account_id, instrument_id)]
    lock = ledger_service.ledgers_lock_statement(account_ids=[account_id])
    state = entry_states_statement(entries)
    assert lock is not None and state is not None
    with transaction.atomic(), statements_batched():
        ledger_rows, state_rows = fetch_together([lock, state])
    thread.join(timeout=30)
    assert not thread.is_alive() and not failure, failure

    # The read after the lock ran on a snapshot taken once the lock was granted.
    assert OrderIntent.objects.filter(client_order_id=holder.client_order_id).exists()
    assert entry_states_from_rows(entries, state_rows)[entries[0][0]].pending_entry == holder.client_order_id
    assert ledger_service.ledgers_locked(account_ids=[account_id], rows=ledger_rows)[account_id] == (
        CapitalLedger.objects.get(account_id=account_id).available
    )
