"""A signal's outcome on an account is one row, written by one upsert: the later decision replaces the earlier."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction

from orders.models import AuditEvent, SignalOutcome
from orders.models.outcomes import Outcome
from orders.outcomes import signal_outcome_record
from processor.signals import SignalKind
from tests.helpers import eventually
from tests.orders.factories import make_setup, make_signal

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_later_decision_replaces_the_earlier_and_keeps_when_the_row_was_created() -> None:
    setup = make_setup()
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    first = signal_outcome_record(
        signal=signal, account_id=setup.account.pk, outcome=Outcome.IN_FLIGHT, client_order_id="ts-1-a"
    )
    second = signal_outcome_record(
        signal=signal,
        account_id=setup.account.pk,
        outcome=Outcome.PLACED,
        reason="exchange order 7",
        client_order_id="ts-1-a",
    )

    row = SignalOutcome.objects.get(account=setup.account)
    assert (row.pk, row.outcome, row.reason) == (first.pk, Outcome.PLACED, "exchange order 7")
    assert second.pk == row.pk and second.created_at == row.created_at == first.created_at
    events = AuditEvent.objects.filter(client_order_id="ts-1-a").order_by("id").values_list("event", flat=True)
    assert list(events) == ["signal.in_flight", "signal.placed"]


def test_a_signal_that_reached_no_account_has_one_row_too() -> None:
    setup = make_setup()
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    signal_outcome_record(signal=signal, account_id=None, outcome=Outcome.NO_TRADE_SETTING)
    signal_outcome_record(signal=signal, account_id=None, outcome=Outcome.STOPPED)
    signal_outcome_record(signal=signal, account_id=setup.account.pk, outcome=Outcome.HALTED)

    assert set(SignalOutcome.objects.values_list("account_id", "outcome")) == {
        (None, Outcome.STOPPED),
        (setup.account.pk, Outcome.HALTED),
    }


@pytest.mark.needs_postgres
def test_a_concurrent_decision_on_the_same_signal_waits_for_the_first_and_replaces_it() -> None:
    setup = make_setup()
    signal = make_signal(setup.strategy, SignalKind.ENTRY_LONG)
    finished = threading.Event()
    errors: list[BaseException] = []

    def second_process() -> None:
        try:
            signal_outcome_record(
                signal=signal, account_id=setup.account.pk, outcome=Outcome.PLACED, client_order_id="c"
            )
            finished.set()
        except BaseException as exc:  # reported to the test below
            errors.append(exc)
        finally:
            connections.close_all()

    racer = threading.Thread(target=second_process)
    with transaction.atomic():
        signal_outcome_record(
            signal=signal, account_id=setup.account.pk, outcome=Outcome.IN_FLIGHT, client_order_id="c"
        )
        racer.start()

        def racer_waits_on_the_row() -> bool:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_clear_snapshot()")  # this transaction would see one snapshot
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                    ["INSERT INTO %orders_signaloutcome%"],
                )
                return cursor.fetchone()[0] == 1

        eventually(racer_waits_on_the_row)
        assert not finished.is_set()
    racer.join(10)

    assert not errors
    assert list(SignalOutcome.objects.values_list("outcome", flat=True)) == [Outcome.PLACED]
    assert AuditEvent.objects.filter(client_order_id="c").count() == 2
