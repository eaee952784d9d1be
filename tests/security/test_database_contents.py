"""The bad-input walks' "nothing changed" proof sees every kind of change."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User

from tests.orders.factories import make_instrument
from tests.security.database_contents import changed_tables, database_contents

pytestmark = pytest.mark.django_db


def test_a_changed_column_an_added_row_and_a_deleted_row_are_each_seen() -> None:
    instrument = make_instrument()
    before = database_contents()
    instrument.tick_size = instrument.tick_size + Decimal("0.01")
    instrument.save(update_fields=["tick_size"])
    changed = database_contents()
    assert changed != before and changed_tables(before, changed) == ["feeds.Instrument"]

    make_instrument(symbol="ETHUSDT")
    added = database_contents()
    assert changed_tables(changed, added) == ["feeds.Instrument"]

    instrument.delete()
    assert changed_tables(added, database_contents()) == ["feeds.Instrument"]


def test_a_many_to_many_link_is_seen_and_a_login_stamp_is_not() -> None:
    user = User.objects.create_user("walker", password="pw-long-enough-123")
    group = Group.objects.create(name="walkers")
    before = database_contents()
    user.groups.add(group)
    assert changed_tables(before, database_contents()) == ["auth.User_groups"]

    linked = database_contents()
    User.objects.filter(pk=user.pk).update(last_login="2026-01-01T00:00:00Z")
    assert database_contents() == linked


def test_a_reading_twice_without_writes_is_equal() -> None:
    make_instrument()
    assert database_contents() == database_contents()
