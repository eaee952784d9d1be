"""Login throttling (django-axes) with the site's own settings: after AXES_FAILURE_LIMIT
wrong passwords for a username from one address, even the right password is refused
with a clear page until the cool-off ends, on the site login and the admin login. The
API takes no passwords at all (tokens and sessions only), so nothing is guessed there."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db
PASSWORD = "right-password-4242"
LOGINS = {"site": "/login/", "admin": "/admin/login/"}


@pytest.fixture
def staff() -> None:
    get_user_model().objects.create_user("victim", password=PASSWORD, is_staff=True)


def attempt(client: Client, where: str, password: str, **extra: str):  # type: ignore[no-untyped-def]
    return client.post(LOGINS[where], {"username": "victim", "password": password}, **extra)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def fail_until_locked(client: Client, where: str, **extra: str) -> None:
    for n in range(settings.AXES_FAILURE_LIMIT):
        response = attempt(client, where, f"wrong-{n}", **extra)
        assert response.status_code in (200, 429)


@pytest.mark.parametrize("where", LOGINS)
def test_after_the_failure_limit_the_right_password_is_refused_with_a_clear_message(staff: None, where: str) -> None:
    client = Client()
    fail_until_locked(client, where)
    response = attempt(client, where, PASSWORD)
    assert response.status_code == 429
    text = response.content.decode()
    assert "Too many failed logins" in text and f"after {settings.AXES_FAILURE_LIMIT} wrong passwords" in text
    assert "Try again in" in text
    assert not logged_in(client)


@pytest.mark.parametrize("where", LOGINS)
def test_fewer_failures_than_the_limit_still_let_the_right_password_in_and_reset_the_count(
    staff: None, where: str
) -> None:
    client = Client()
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        assert attempt(client, where, f"wrong-{n}").status_code == 200
    assert attempt(client, where, PASSWORD).status_code == 302
    assert logged_in(client)
    assert not AccessAttempt.objects.filter(username="victim").exists()


def test_a_lockout_holds_one_username_from_one_address_and_a_forged_forwarded_for_does_not_escape_it(
    staff: None,
) -> None:
    client = Client()
    fail_until_locked(client, "site")
    assert attempt(client, "site", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 429
    assert attempt(Client(), "admin", PASSWORD).status_code == 429  # one lock for both login pages
    # The real user elsewhere is not locked out by someone guessing their password.
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert attempt(elsewhere, "site", PASSWORD).status_code == 302 and logged_in(elsewhere)


def test_the_lock_ends_after_the_cool_off(staff: None) -> None:
    client = Client()
    fail_until_locked(client, "site")
    assert attempt(client, "site", PASSWORD).status_code == 429
    cooled = settings.AXES_COOLOFF_TIME + timedelta(seconds=1)
    for row in AccessAttempt.objects.filter(username="victim"):
        row.attempt_time -= cooled
        row.save(update_fields=["attempt_time"])
    assert attempt(client, "site", PASSWORD).status_code == 302 and logged_in(client)


def test_an_administrator_lifts_a_lock_at_once(staff: None) -> None:
    client = Client()
    fail_until_locked(client, "admin")
    call_command("axes_reset_username", "victim", verbosity=0)
    assert attempt(client, "admin", PASSWORD).status_code == 302 and logged_in(client)


def test_the_api_accepts_no_password_so_there_is_nothing_to_guess(staff: None) -> None:
    basic = base64.b64encode(f"victim:{PASSWORD}".encode()).decode()
    response = Client().get("/api/orders/", HTTP_AUTHORIZATION=f"Basic {basic}")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Token")


def test_the_throttle_is_wired_into_every_authenticate_call() -> None:
    assert settings.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"
    assert settings.MIDDLEWARE[-1] == "axes.middleware.AxesMiddleware"
