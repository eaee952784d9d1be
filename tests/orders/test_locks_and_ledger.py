"""Entry leases (TTL, owner tokens) and the ledger service's refusals and journal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.fixed_point import SCALE
from orders.ledger import InsufficientCapital, ledger_allocate, ledger_check, ledger_lock, ledger_reserve
from orders.locks import lock_acquire, lock_release
from orders.models import CapitalLedger, LedgerEntry
from tests.orders.factories import make_setup

pytestmark = pytest.mark.django_db(transaction=True)
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_lease_is_exclusive_until_released_or_expired() -> None:
    account = make_setup().account
    at = lambda seconds: lambda: T0 + timedelta(seconds=seconds)  # noqa: E731
    assert lock_acquire(account_id=account.pk, scope="entry:1", owner="a", ttl_s=30, now=at(0))
    assert not lock_acquire(account_id=account.pk, scope="entry:1", owner="b", ttl_s=30, now=at(10))
    assert lock_acquire(account_id=account.pk, scope="entry:2", owner="b", ttl_s=30, now=at(10))  # another instrument
    assert lock_acquire(
        account_id=account.pk, scope="entry:1", owner="a", ttl_s=30, now=at(20)
    )  # renewal by the holder
    assert not lock_release(account_id=account.pk, scope="entry:1", owner="b")  # owner-checked
    assert lock_acquire(account_id=account.pk, scope="entry:1", owner="b", ttl_s=30, now=at(51))  # a's lease expired
    assert not lock_release(account_id=account.pk, scope="entry:1", owner="a")
    assert lock_release(account_id=account.pk, scope="entry:1", owner="b")
    assert lock_acquire(account_id=account.pk, scope="entry:1", owner="c", ttl_s=30, now=at(52))


def test_reservations_beyond_available_are_refused_and_the_database_refuses_a_negative_available() -> None:
    from django.db import IntegrityError, transaction

    account = make_setup(capital="100").account
    with transaction.atomic():
        ledger = ledger_lock(account_id=account.pk)
        ledger_reserve(ledger=ledger, amount=60 * SCALE, client_order_id="ts-x-1")
        with pytest.raises(InsufficientCapital):
            ledger_reserve(ledger=ledger, amount=41 * SCALE, client_order_id="ts-x-2")
    with pytest.raises(InsufficientCapital):
        ledger_allocate(account_id=account.pk, allocated_capital=50 * SCALE)  # 60 is reserved
    with pytest.raises(IntegrityError), transaction.atomic():
        CapitalLedger.objects.filter(account=account).update(reserved_for_positions=41 * SCALE)
    ledger_allocate(account_id=account.pk, allocated_capital=200 * SCALE)
    assert list(LedgerEntry.objects.filter(account=account).values_list("kind", flat=True)) == [
        "allocate",
        "reserve",
        "allocate",
    ]
    assert CapitalLedger.objects.get(account=account).available == 140 * SCALE
    report = ledger_check(account_id=account.pk)
    # The reservation has no intent behind it (written directly here): the check says so.
    assert not report.ok and "pending intents" in report.problems[0]
