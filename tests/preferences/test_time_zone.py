"""Every time in the user's zone with the zone's name: the setting, the filters, the admin, the favicon."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.template import Context, Template
from django.test import Client
from django.utils import timezone

from preferences.models import UserPreference
from preferences.time_format import ns_to_datetime, zone_named

pytestmark = pytest.mark.django_db

MOMENT = datetime(2026, 7, 1, 12, 30, 5, 250_000, tzinfo=UTC)
MOMENT_NS = int(MOMENT.timestamp()) * 1_000_000_000 + 250_000_000


def render(text: str, **context: object) -> str:
    return Template("{% load times %}" + text).render(Context(context))


def test_times_are_utc_with_the_zone_name_by_default() -> None:
    assert render("{{ t|when }}", t=MOMENT) == "2026-07-01 12:30:05 UTC"
    assert render("{{ t|clock }}", t=MOMENT) == "12:30:05 UTC"
    assert render("{{ t|ns_clock }}", t=MOMENT_NS) == "12:30:05.250 UTC"
    assert render("{{ t|when }}{{ n|ns_clock }}", t=None, n=None) == "––"


def test_the_active_zone_changes_every_filter() -> None:
    with timezone.override(zone_named("Asia/Kolkata")):
        assert render("{{ t|when }}", t=MOMENT) == "2026-07-01 18:00:05 IST"
        assert render("{{ t|ns_clock }}", t=MOMENT_NS) == "18:00:05.250 IST"


def test_an_unknown_zone_name_falls_back_to_utc() -> None:
    assert zone_named("Mars/Olympus") is UTC
    assert ns_to_datetime(MOMENT_NS) == MOMENT


def test_the_setting_changes_the_times_the_site_renders() -> None:
    user = get_user_model().objects.create_user("tz", password="pw-123456")
    client = Client()
    client.force_login(user)
    page = client.get("/settings/time-zone/").content.decode()
    assert 'data-time-zone="UTC"' in page and " UTC</span>" in page
    response = client.post("/settings/time-zone/", {"time_zone": "America/New_York"})
    assert response.status_code == 302
    assert UserPreference.objects.get(user=user).time_zone == "America/New_York"
    page = client.get("/settings/time-zone/").content.decode()
    assert 'data-time-zone="America/New_York"' in page
    assert " EST</span>" in page or " EDT</span>" in page


@pytest.mark.parametrize("value", ["", "Mars/Olympus", "UTC; DROP TABLE", "x" * 500, "../../etc"])
def test_a_zone_that_does_not_exist_is_a_form_error(value: str) -> None:
    user = get_user_model().objects.create_user("tz2", password="pw-123456")
    client = Client()
    client.force_login(user)
    response = client.post("/settings/time-zone/", {"time_zone": value})
    assert response.status_code == 400 and 'role="alert"' in response.content.decode()
    assert not UserPreference.objects.filter(user=user).exists()


def test_the_admin_shows_fill_times_as_dates_in_the_users_zone() -> None:
    from orders.admin import FillAdmin
    from orders.models import Fill

    with timezone.override(zone_named("Europe/Berlin")):
        shown = FillAdmin.fill_time(None, Fill(ts_event=MOMENT_NS))  # type: ignore[arg-type]
    assert shown == "2026-07-01 14:30:05 CEST"


def test_the_favicon_is_served() -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"].endswith("favicon.svg")
    icon = Client().get(response["Location"])
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)
