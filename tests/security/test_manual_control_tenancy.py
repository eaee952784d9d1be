"""Manual control routes, posted as each user of the tenant world: only the owner reaches their objects.

Another user (ordinary or staff) gets 404 for the owner's position, order, account and
trade setting, as for a missing one, and nothing changes; the anonymous are sent to
log in (401 on the API); the owner's request without confirmation or reason is a
form error (400) that leaves nothing behind; a dashboard post without the CSRF token
is refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from dashboard.models import ControlAudit
from orders.models import OrderIntent, Position, SignalOutcome
from tests.security.tenant_world import World, world_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db

ACTION = {"confirm": "yes", "reason": "walk"}


def _routes(world: World) -> list[tuple[str, dict[str, Any]]]:
    ids = world.ids
    entry = {**ACTION, "trade_setting": ids["tradesetting"], "instrument": ids["instrument"], "side": "LONG"}
    return [
        (f"/controls/positions/{ids['position']}/close/", ACTION),
        (f"/controls/orders/{ids['order']}/cancel/", ACTION),
        (f"/controls/accounts/{ids['account']}/flatten/", ACTION),
        ("/controls/entries/", entry),
        (f"/api/manual/positions/{ids['position']}/close/", ACTION),
        (f"/api/manual/orders/{ids['order']}/cancel/", ACTION),
        (f"/api/manual/accounts/{ids['account']}/flatten/", ACTION),
        ("/api/manual/entries/", entry),
    ]


def _untouched(world: World) -> tuple[int, int, int, int]:
    return (
        Position.objects.filter(pk=world.ids["position"], state="OPEN").count(),
        OrderIntent.objects.count(),
        SignalOutcome.objects.count(),
        ControlAudit.objects.count(),
    )


@pytest.mark.parametrize("role", ["other", "staff"])
def test_another_user_gets_not_found_and_nothing_changes(world: World, role: str) -> None:
    before = _untouched(world)
    client = world.client(role)
    for url, data in _routes(world):
        response = client.post(url, data, HTTP_ACCEPT="application/json")
        assert response.status_code == 404, (url, response.status_code, response.content)
    assert _untouched(world) == before


def test_the_anonymous_are_sent_to_log_in(world: World) -> None:
    client = world.client("anonymous")
    for url, data in _routes(world):
        response = client.post(url, data)
        assert response.status_code == (401 if url.startswith("/api/") else 302), url


@pytest.mark.parametrize(
    "change",
    [
        {"confirm": ""},
        {"reason": ""},
        {"reason": "x" * 301},
        {"side": "UP"},
        {"quantity": "abc"},
        {"quantity": "-1"},
        {"quantity": "1e400"},
        {"trade_setting": "x"},
        {"instrument": "99999999999999999999999"},
    ],
)
def test_bad_input_from_the_owner_is_a_form_error(world: World, change: dict[str, str]) -> None:
    before = _untouched(world)
    client = world.client("owner")
    for url, data in _routes(world):
        if not url.endswith("entries/") and not ({"confirm", "reason"} & change.keys()):
            continue
        response = client.post(url, {**data, **change}, HTTP_ACCEPT="application/json")
        assert response.status_code == 400, (url, change, response.content)
    assert _untouched(world) == before


def test_a_dashboard_post_without_the_csrf_token_is_refused(world: World) -> None:
    client = world.client("owner", enforce_csrf_checks=True)
    for url, data in _routes(world)[:4]:
        assert client.post(url, data).status_code == 403, url
    api = world.client("owner", enforce_csrf_checks=True)
    for url, data in _routes(world)[4:]:
        assert api.post(url, data).status_code == 403, url
