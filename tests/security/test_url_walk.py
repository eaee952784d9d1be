"""Every route of the site, walked as four users: the status each may get, from one table.

The routes come from the resolver, so a route added without a row in ROUTES fails
`test_every_route_has_an_entry`. Each row names a real URL (object ids from the tenant
world) and the status for: anonymous, another ordinary user, a staff user who is not a
superuser (holding every model permission), and the objects' owner (also staff, not
superuser). Responses to anyone but the owner must not carry the owner's secrets or ids.

Admin statuses: 302 to the admin login for non-staff; 403 where the staff user lacks the
right (superuser-only models, read-only rows); 302 to the admin index for an object the
user may not see (the admin answers "does not exist", as for a made-up id).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from tests.security.routes import site_routes
from tests.security.tenant_world import ROLES, World, live_db_fixture, world_fixture  # noqa: F401  (the fixtures)

# Thousands of cheap in-process requests on one world: CI runs both databases' walks side by side.
pytestmark = pytest.mark.walk

# (anonymous, other, staff, owner)
Statuses = tuple[int, int, int, int]
ROUTES: dict[str, tuple[str, Statuses]] = {}


def route(pattern: str, url: str, statuses: Statuses) -> None:
    """One table row: the URL to fetch and the status each user must get."""
    assert pattern not in ROUTES, f"{pattern} listed twice"
    ROUTES[pattern] = (url, statuses)


# --- the site ----------------------------------------------------------------------------
LOGIN = 302  # LoginRequiredMiddleware sends the anonymous to the login page
route("", "/", (LOGIN, 200, 200, 200))
route("dashboard/panels/<slug:name>/", "/dashboard/panels/trading/", (LOGIN, 200, 200, 200))
route("markets/depth/", "/markets/depth/", (LOGIN, 200, 200, 200))
route("markets/<int:pk>/depth/", "/markets/{orderbook_instrument}/depth/", (LOGIN, 200, 200, 200))
# Market data for everyone; the owner's fills (with their order ids) for the owner only.
route(
    "dashboard/charts/<int:instrument_id>/history/",
    "/dashboard/charts/{instrument}/history/?timeframe=1h&end={chart_end_ms}",
    (LOGIN, 200, 200, 200),
)
# Controls are POST-only: a GET is refused whoever asks.
route("controls/strategies/<int:pk>/", "/controls/strategies/{strategy}/", (LOGIN, 405, 405, 405))
route("controls/trade-settings/<int:pk>/", "/controls/trade-settings/{tradesetting}/", (LOGIN, 405, 405, 405))
route("controls/kill-switch/<str:scope>/", "/controls/kill-switch/global/", (LOGIN, 405, 405, 405))
route(
    "controls/intents/<str:client_order_id>/release/",
    "/controls/intents/{client_order_id}/release/",
    (LOGIN, 405, 405, 405),
)
route(
    "controls/intents/<str:client_order_id>/wait/", "/controls/intents/{client_order_id}/wait/", (LOGIN, 405, 405, 405)
)
route("controls/positions/<int:pk>/close/", "/controls/positions/{position}/close/", (LOGIN, 405, 405, 405))
route("controls/orders/<int:pk>/cancel/", "/controls/orders/{order}/cancel/", (LOGIN, 405, 405, 405))
route("controls/accounts/<int:pk>/flatten/", "/controls/accounts/{account}/flatten/", (LOGIN, 405, 405, 405))
route("controls/entries/", "/controls/entries/", (LOGIN, 405, 405, 405))
route("trades/", "/trades/", (LOGIN, 200, 200, 200))
route("trades/export.csv", "/trades/export.csv", (LOGIN, 200, 200, 200))
route("performance/", "/performance/", (LOGIN, 200, 200, 200))
route("login/", "/login/", (200, 200, 200, 200))
route("favicon.ico", "/favicon.ico", (301, 301, 301, 301))
route("settings/time-zone/", "/settings/time-zone/", (LOGIN, 200, 200, 200))

# --- alerts: the user's own channels and alert history ------------------------------------
route("alerts/", "/alerts/", (LOGIN, 200, 200, 200))
route("alerts/channels/<int:pk>/", "/alerts/channels/{notificationchannel}/", (LOGIN, 404, 404, 200))
route("alerts/channels/<int:pk>/delete/", "/alerts/channels/{notificationchannel}/delete/", (LOGIN, 405, 405, 405))
route("alerts/channels/<int:pk>/test/", "/alerts/channels/{notificationchannel}/test/", (LOGIN, 405, 405, 405))
route("logout/", "/logout/", (LOGIN, 405, 405, 405))
route("healthz", "/healthz", (200, 200, 200, 200))
route("readyz", "/readyz", (200, 200, 200, 200))
route("internal/health", "/internal/health", (LOGIN, 302, 200, 200))
route("metrics", "/metrics", (403, 403, 200, 200))

# --- recovery --------------------------------------------------------------------------
route("recovery/prompts.json", "/recovery/prompts.json", (LOGIN, 200, 200, 200))
route("recovery/prompts/<str:recovery_token>/", "/recovery/prompts/{recovery_token}/", (LOGIN, 404, 404, 200))
route("recovery/prompts/<str:recovery_token>/code", "/recovery/prompts/{recovery_token}/code", (LOGIN, 405, 405, 405))
# No state names a prompt of the caller: refused before any code is exchanged.
route("recovery/callback/<str:broker>", "/recovery/callback/upstox", (LOGIN, 400, 400, 400))

# --- backtests: a run is its owner's; another user's is a 404, as one that does not exist ---
route("backtests/", "/backtests/", (LOGIN, 200, 200, 200))
route("backtests/new/", "/backtests/new/", (LOGIN, 200, 200, 200))
route("backtests/compare/", "/backtests/compare/?a={backtestrun}&b={backtestrun}", (LOGIN, 404, 404, 200))
route("backtests/<int:pk>/", "/backtests/{backtestrun}/", (LOGIN, 404, 404, 200))
route("backtests/<int:pk>/state.json", "/backtests/{backtestrun}/state.json", (LOGIN, 404, 404, 200))
route("backtests/sweeps/new/", "/backtests/sweeps/new/", (LOGIN, 200, 200, 200))
route("backtests/sweeps/<int:pk>/", "/backtests/sweeps/{backtestsweep}/", (LOGIN, 404, 404, 200))
route("backtests/sweeps/<int:pk>/state.json", "/backtests/sweeps/{backtestsweep}/state.json", (LOGIN, 404, 404, 200))

# --- the API ---------------------------------------------------------------------------
route("api/schema/", "/api/schema/", (401, 200, 200, 200))
route("api/order-books/<int:pk>/", "/api/order-books/{orderbook_instrument}/", (401, 200, 200, 200))
route("api/docs/", "/api/docs/", (LOGIN, 200, 200, 200))
route("api/", "/api/", (401, 200, 200, 200))
# Manual control is POST-only (tests/security/test_manual_control_tenancy.py posts as each user).
route("api/manual/positions/<int:pk>/close/", "/api/manual/positions/{position}/close/", (401, 405, 405, 405))
route("api/manual/orders/<int:pk>/cancel/", "/api/manual/orders/{order}/cancel/", (401, 405, 405, 405))
route("api/manual/accounts/<int:pk>/flatten/", "/api/manual/accounts/{account}/flatten/", (401, 405, 405, 405))
route("api/manual/entries/", "/api/manual/entries/", (401, 405, 405, 405))
route("api/<drf_format_suffix:format>", "/api/.json", (401, 200, 200, 200))
_API = {
    "accounts": "account",
    "orders": "order",
    "fills": "fill",
    "positions": "position",
    "signals": "strategysignal",
    "strategies": "strategy",
    "prompts": "authprompt",
    "trades": "trade",
    "backtests": "backtestrun",
    "backtest-sweeps": "backtestsweep",
}
for _resource, _key in _API.items():
    route(f"api/{_resource}/", f"/api/{_resource}/", (401, 200, 200, 200))
    route(f"api/{_resource}\\.(?P<format>[a-z0-9]+)/?", f"/api/{_resource}.json", (401, 200, 200, 200))
    route(f"api/{_resource}/(?P<pk>[^/.]+)/", f"/api/{_resource}/{{{_key}}}/", (401, 404, 404, 200))
    route(
        f"api/{_resource}/(?P<pk>[^/.]+)\\.(?P<format>[a-z0-9]+)/?",
        f"/api/{_resource}/{{{_key}}}.json",
        (401, 404, 404, 200),
    )
route("api/accounts/(?P<pk>[^/.]+)/journal/", "/api/accounts/{account}/journal/", (401, 404, 404, 200))
route(
    "api/accounts/(?P<pk>[^/.]+)/journal\\.(?P<format>[a-z0-9]+)/?",
    "/api/accounts/{account}/journal.json",
    (401, 404, 404, 200),
)
route("api/performance/", "/api/performance/", (401, 200, 200, 200))
route("api/performance\\.(?P<format>[a-z0-9]+)/?", "/api/performance.json", (401, 200, 200, 200))
route("api/health/", "/api/health/", (401, 403, 200, 200))
route("api/health\\.(?P<format>[a-z0-9]+)/?", "/api/health.json", (401, 403, 200, 200))
route("api/health/(?P<pk>.+)/", "/api/health/{component}/", (401, 403, 200, 200))
route(
    "api/health/(?P<pk>.+)\\.(?P<format>[a-z0-9]+)/?",
    "/api/health/{component}.json",
    (401, 403, 200, 200),
)

# --- the admin -------------------------------------------------------------------------
ADMIN_LOGIN = 302  # the admin sends non-staff to its own login page
route("admin/", "/admin/", (ADMIN_LOGIN, ADMIN_LOGIN, 200, 200))
route("admin/login/", "/admin/login/", (200, 200, 302, 302))
route("admin/logout/", "/admin/logout/", (ADMIN_LOGIN, ADMIN_LOGIN, 405, 405))
route("admin/password_change/", "/admin/password_change/", (ADMIN_LOGIN, ADMIN_LOGIN, 200, 200))
route("admin/password_change/done/", "/admin/password_change/done/", (ADMIN_LOGIN, ADMIN_LOGIN, 200, 200))
route("admin/autocomplete/", "/admin/autocomplete/", (ADMIN_LOGIN, ADMIN_LOGIN, 403, 403))
route("admin/jsi18n/", "/admin/jsi18n/", (ADMIN_LOGIN, ADMIN_LOGIN, 200, 200))
route(
    "admin/r/<path:content_type_id>/<path:object_id>/",
    "/admin/r/{account_content_type}/{account}/",
    (ADMIN_LOGIN, ADMIN_LOGIN, 404, 404),  # accounts have no page on the site to jump to
)
route(
    "admin/(?P<app_label>core|feeds|processor|orders|recovery|dashboard|auth|axes|django_celery_beat|authtoken)/",
    "/admin/orders/",
    (ADMIN_LOGIN, ADMIN_LOGIN, 200, 200),
)
route("admin/(?P<url>.*)", "/admin/nothing-here/", (ADMIN_LOGIN, ADMIN_LOGIN, 404, 404))

NOT_FOUND = 302  # an object outside the user's scope: redirected to the index as "does not exist"
DENIED = 403


def admin_model(
    app: str,
    model: str,
    *,
    superuser_only: bool = False,
    add: bool = False,
    delete: bool = False,
    staff_sees: bool = False,
    key: str | None = None,
) -> None:
    """The six admin routes of one model: list, add, and an owner's object's history, delete, change, bare."""
    base = f"admin/{app}/{model}/"
    obj = f"/{base}{{{key or model}}}/"
    non_staff = (ADMIN_LOGIN, ADMIN_LOGIN)
    if superuser_only:
        for suffix, url in (("", f"/{base}"), ("add/", f"/{base}add/")):
            route(base + suffix, url, (*non_staff, DENIED, DENIED))
        for suffix in ("history/", "delete/", "change/"):
            route(f"{base}<path:object_id>/{suffix}", obj + suffix, (*non_staff, DENIED, DENIED))
    else:
        other_staff = 200 if staff_sees else NOT_FOUND
        route(base, f"/{base}", (*non_staff, 200, 200))
        route(base + "add/", f"/{base}add/", (*non_staff, *((200, 200) if add else (DENIED, DENIED))))
        route(f"{base}<path:object_id>/history/", obj + "history/", (*non_staff, other_staff, 200))
        route(
            f"{base}<path:object_id>/delete/",
            obj + "delete/",
            (*non_staff, *((other_staff, 200) if delete else (DENIED, DENIED))),
        )
        route(f"{base}<path:object_id>/change/", obj + "change/", (*non_staff, other_staff, 200))
    # The bare object URL redirects to its change page, for everyone.
    route(f"{base}<path:object_id>/", obj, (302, 302, 302, 302))


# Site-wide rows: superusers only.
admin_model("core", "componenthealth", superuser_only=True)
for _model in ("feed", "instrument", "subscription", "tick", "streamcheckpoint", "knownhole"):
    admin_model("feeds", _model, superuser_only=True)
for _model in ("accessattempt", "accesslog", "accessfailurelog"):  # login throttling: site-wide
    admin_model("axes", _model, superuser_only=True)
for _model in ("periodictask", "clockedschedule", "crontabschedule", "solarschedule", "intervalschedule"):
    admin_model("django_celery_beat", _model, superuser_only=True)  # the schedule is site-wide
admin_model("auth", "group", superuser_only=True)
admin_model("auth", "user", superuser_only=True)
route("admin/auth/user/<id>/password/", "/admin/auth/user/{user}/password/", (ADMIN_LOGIN, ADMIN_LOGIN, 403, 403))
# Strategies: superusers change them; staff see (read-only) those their accounts trade.
admin_model("processor", "strategy")
admin_model("processor", "strategysignal")
admin_model("processor", "strategyoutputrecord")
# The owner's rows.
admin_model("orders", "account", add=True, delete=True)
admin_model("orders", "tradesetting", add=True, delete=True)
for _model in ("order", "fill", "position", "capitalledger", "ledgerentry", "auditevent", "signaloutcome"):
    admin_model("orders", _model)
admin_model("recovery", "brokertoken")
admin_model("recovery", "authprompt")
admin_model("dashboard", "killswitch")
admin_model("dashboard", "controlaudit")
admin_model("authtoken", "tokenproxy", add=True, delete=True)


def _cases() -> Iterator[Any]:
    for pattern, (url, statuses) in ROUTES.items():
        for role, status in zip(ROLES, statuses, strict=True):
            yield pytest.param(pattern, url, role, status, id=f"{role}:{url}")


@pytest.fixture(scope="module")
def clients(world: World, django_db_blocker: Any) -> dict[str, Client]:
    with django_db_blocker.unblock():
        return {role: world.client(role, raise_request_exception=False) for role in ROLES}


def test_every_route_has_an_entry() -> None:
    routes = site_routes()
    missing = [pattern for pattern in routes if pattern not in ROUTES]
    stale = [pattern for pattern in ROUTES if pattern not in routes]
    assert not missing, f"routes without an entry in ROUTES (add the status per user): {missing}"
    assert not stale, f"entries for routes that no longer exist: {stale}"


def _secrets(world: World) -> list[str]:
    """What only the owner may ever be shown."""
    return [world.ids["api_key"], world.ids["recovery_token"], world.ids["client_order_id"], world.ids["alert_title"]]


@pytest.mark.django_db
@pytest.mark.parametrize(("pattern", "url", "role", "status"), list(_cases()))
def test_route_answers_each_user_as_allowed(
    live_db: World, clients: dict[str, Client], pattern: str, url: str, role: str, status: int
) -> None:
    built = live_db
    response = clients[role].get(url.format(**built.ids))
    assert response.status_code == status, f"{role} GET {url}: {response.status_code}, expected {status}"
    if role != "owner" and not getattr(response, "streaming", False):
        body = response.content.decode(errors="replace")
        leaked = [secret for secret in _secrets(built) if secret in body]
        assert not leaked, f"{role} GET {url} shows the owner's {leaked}"
    if not getattr(response, "streaming", False):
        # A notification URL's secret is never shown back, not even to its owner.
        assert built.ids["channel_secret"] not in response.content.decode(errors="replace")


@pytest.mark.django_db
def test_the_chart_history_shows_the_owner_their_fills(live_db: World, clients: dict[str, Client]) -> None:
    # What the walk's leak check keeps from the others is really there for the owner.
    url = "/dashboard/charts/{instrument}/history/?timeframe=1h&end={chart_end_ms}".format(**live_db.ids)
    owner = {fill["client_order_id"] for fill in clients["owner"].get(url).json()["fills"]}
    assert owner, "the owner sees their own fills"
    other = {fill["client_order_id"] for fill in clients["other"].get(url).json()["fills"]}
    assert not owner & other
