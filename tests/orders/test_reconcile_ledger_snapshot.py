"""ledger_check reads one snapshot: a reservation committed between its reads is never a torn state."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import close_old_connections, connection

from core.fixed_point import SCALE
from feeds.market import parse_fixed
from orders.ledger import ledger_check
from orders.lifecycle import IntentSpec, intent_create
from orders.models import CapitalLedger, OrderIntent
from tests.orders.factories import make_setup, market_entry_spec

pytestmark = [pytest.mark.needs_postgres, pytest.mark.django_db(transaction=True)]


def _reserve_in_another_connection(spec: IntentSpec) -> None:
    """Reserve and record an intent in one transaction of another connection, the way an entry does."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            intent_create(spec=spec)
        except BaseException as exc:  # surfaced in the test's thread
            failure.append(exc)
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and not failure, failure


def _after_first_ledger_read(action: Callable[[], None]) -> Callable[..., Any]:
    """A query wrapper that runs `action` once, right after the check's read of the ledger row."""
    done = False

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal done
        result = execute(sql, params, many, context)
        if not done and '"orders_capitalledger"' in sql and sql.lstrip().upper().startswith("SELECT"):
            done = True
            action()
        return result

    return wrapper


def test_a_reservation_committed_between_the_checks_reads_is_no_false_alarm() -> None:
    setup = make_setup(capital="10000")
    spec = market_entry_spec(
        setup,
        f"ts-{setup.account.pk}-between0000000001",
        quantity=SCALE // 100,
        price=50_000 * SCALE,
        reserve=parse_fixed("3047.17"),
    )
    with connection.execute_wrapper(_after_first_ledger_read(lambda: _reserve_in_another_connection(spec))):
        report = ledger_check(account_id=setup.account.pk)

    # The write landed while the check was reading, and the check saw none of it.
    assert OrderIntent.objects.filter(client_order_id=spec.client_order_id, state="PENDING").exists()
    assert CapitalLedger.objects.get(account=setup.account).reserved_for_orders == spec.reserve
    assert report.ok, report.problems
    # The next check sees all of it, still consistent.
    assert ledger_check(account_id=setup.account.pk).ok
