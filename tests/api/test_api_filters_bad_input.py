"""Bad input against every API route, walked from the router: junk filters, NUL bytes,
huge and negative numbers, unicode, wrong types, unknown formats and write methods.
Never a 500; a 400 names the parameter; nothing in the database changes.

A route added to the router is walked here without an entry; a filter added to a
FilterSet is fed the whole corpus.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, resolve

from api.urls import router
from tests.api.test_api import Trader, traders  # noqa: F401  (fixture: two users with orders, fills, prompts)
from tests.security.database_contents import Contents, database_contents

# Thousands of in-process requests, no processes, no timing: CI runs it with the other walks.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.walk]

JUNK = [
    "abc",
    "\x00",
    "1\x00",
    "a\x00b",
    "99999999999999999999",
    "-99999999999999999999",
    str(2**63),
    "-1",
    "0",
    "1.5",
    "1e3",
    "0x10",
    " 1 ",
    "1,2",
    "NaN",
    "Infinity",
    "ünïcødé",
    "😀",
    "\u202e\u0000",
    "' OR 1=1 --",
    "%00",
    "[]",
    '{"a": 1}',
    "true",
    "x" * 5000,
    "",
]
PK_JUNK = ["\x00", "1\x00", "0", "-1", "99999999999999999999", str(2**63), "abc", "ü", "😀", "%00", "1e3", "x" * 500]
FORMATS = ["json", "xml", "api", "html", "yaml", "zz9"]
WRITES = ["post", "put", "patch", "delete"]
PAGINATION = ["limit", "offset"]
ROUTES: list[URLPattern] = [p for p in router.urls if isinstance(p, URLPattern)]
ALLOWED = {200, 400, 401, 403, 404, 405, 406}


def path_of(pattern: URLPattern, *, pk: str = "", fmt: str = "") -> str:
    """The concrete path of a router pattern with `pk` and `format` filled in."""
    text = pattern.pattern.regex.pattern
    text = re.sub(r"\(\?P<pk>[^)]*\)", lambda _: quote(pk, safe=""), text)
    text = re.sub(r"\(\?P<format>[^)]*\)", lambda _: ("." if pattern.name == "api-root" else "") + fmt, text)
    text = text.removeprefix("^").replace(r"\Z", "").removesuffix("$").replace("/?", "").replace("\\.", ".")
    return "/api/" + text


def snapshot() -> Contents:
    """Every row of every model of the site's apps, read in one statement (tests.security.database_contents)."""
    return database_contents(unwatched_apps=frozenset({"sessions", "axes", "admin"}), unwatched_columns=frozenset())


def filter_names(pattern: URLPattern) -> list[str]:
    view = pattern.callback.cls  # type: ignore[attr-defined]
    filterset = getattr(view, "filterset_class", None)
    return sorted(filterset.base_filters) if filterset is not None else []


def is_list(pattern: URLPattern) -> bool:
    return pattern.name is not None and pattern.name.endswith(("-list", "-journal"))


def own_pk(client: Client, pattern: URLPattern) -> str:
    """A pk the caller may read on this route: the first row of its resource's list."""
    base = (pattern.name or "").split("-")[0]
    if base == "health":
        return "feed:sim/trades"
    listing = next(p for p in ROUTES if p.name == f"{base}-list" and "format" not in p.pattern.regex.groupindex)
    results = client.get(path_of(listing)).json()["results"]
    assert results, f"{base}: the fixture should give the caller a row"
    return str(results[0]["id"])


class Probe:
    """Requests as one user; any answer outside ALLOWED, or a 400 that does not name the parameter, is recorded."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.failures: list[str] = []

    def get(self, path: str, query: dict[str, str] | None = None, *, names: str | None = None) -> int:
        response = self.client.get(path, query or {})
        where = f"GET {path!r} {query!r}"
        if response.status_code not in ALLOWED:
            self.failures.append(f"{where}: {response.status_code}")
        elif response.status_code == 400 and names is not None:
            body = response.json()
            if names not in body:
                self.failures.append(f"{where}: 400 without naming {names!r}: {body!r}"[:300])
        return int(response.status_code)


@pytest.fixture
def alice(traders: tuple[Trader, Trader]) -> Client:  # noqa: F811
    owner = traders[0].setup.account.owner
    owner.is_staff = True  # the health routes are staff-only: walk them too
    owner.save(update_fields=["is_staff"])
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    return client


def test_the_walk_covers_every_router_route() -> None:
    names = {p.name for p in ROUTES}
    assert {"account-journal", "health-detail", "api-root"} <= names
    for pattern in ROUTES:
        path = path_of(pattern, pk="7", fmt="json")
        assert resolve(path).url_name == pattern.name, path


# One test walks every route (a fixture per route would rebuild the trading fixture 36 times);
# the failures name the route, the request and the answer.
def test_junk_query_values_never_500_and_a_400_names_the_parameter(alice: Client) -> None:
    probe = Probe(alice)
    before = snapshot()
    # Filters are the same with or without a format suffix: each view once, through its suffix route.
    suffixed = {p.name: p for p in ROUTES if "format" in p.pattern.regex.groupindex}
    for pattern in suffixed.values():
        pk = own_pk(alice, pattern) if "pk" in pattern.pattern.regex.groupindex else ""
        path = path_of(pattern, pk=pk, fmt="json")
        named = [*filter_names(pattern), *(PAGINATION if is_list(pattern) else [])]
        for name in [*named, "format", "unknown", "\x00"]:
            for value in JUNK:
                probe.get(path, {name: value}, names=name if name in named else None)
        if is_list(pattern):
            probe.get(path, dict.fromkeys(filter_names(pattern), "1"))  # every filter at once
    assert probe.failures == []
    assert snapshot() == before


def test_junk_ids_formats_and_write_methods_never_500_and_change_nothing(alice: Client) -> None:
    probe = Probe(alice)
    before = snapshot()
    for pattern in ROUTES:
        groups = pattern.pattern.regex.groupindex
        pks = [own_pk(alice, pattern), *PK_JUNK] if "pk" in groups else [""]
        for pk in pks:
            for fmt in FORMATS if "format" in groups else [""]:
                path = path_of(pattern, pk=pk, fmt=fmt)
                probe.get(path)
                if pk not in pks[:2] or fmt not in ("", "json"):
                    continue  # the write methods are refused before any id or format is looked at
                for method in WRITES:
                    response = getattr(alice, method)(path, data='{"owner": 1}', content_type="application/json")
                    if response.status_code not in ALLOWED or response.status_code == 200:
                        probe.failures.append(f"{method.upper()} {path!r}: {response.status_code}")
    assert probe.failures == []
    assert snapshot() == before


def test_format_suffixes_answer_or_404_never_a_type_error(traders: tuple[Trader, Trader], alice: Client) -> None:  # noqa: F811
    bob_account = traders[1].setup.account.pk
    own = traders[0].setup.account.pk
    assert alice.get(f"/api/accounts/{own}/journal.json").status_code == 200
    assert alice.get(f"/api/accounts/{bob_account}/journal.json").status_code == 404
    assert alice.get(f"/api/accounts/{bob_account}/journal/").status_code == 404
    assert alice.get("/api/health.json").status_code == 200
    assert alice.get("/api/health/feed:none/trades.json").status_code == 404
    assert alice.get(f"/api/accounts/{own}.json").status_code == 200
    assert alice.get(f"/api/accounts/{own}.xml").status_code == 404


def test_filters_are_typed_and_bounded(alice: Client) -> None:
    cases = {
        "/api/orders/?account=abc": "account",
        "/api/orders/?status=NOT_A_STATUS": "status",
        "/api/orders/?client_order_id=" + "x" * 41: "client_order_id",
        "/api/orders/?client_order_id=a%00b": "client_order_id",
        "/api/signals/?symbol=%00": "symbol",
        "/api/signals/?kind=LONG": "kind",
        "/api/fills/?order=9223372036854775808": "order",
        "/api/positions/?state=open": "state",
        "/api/orders/?limit=99999999999999999999": "limit",
        f"/api/orders/?limit={settings.API_MAX_PAGE_SIZE + 1}": "limit",
        "/api/orders/?limit=0": "limit",
        "/api/orders/?limit=abc": "limit",
        "/api/orders/?offset=-1": "offset",
        "/api/orders/?offset=99999999999999999999": "offset",
    }
    for path, field in cases.items():
        response = alice.get(path)
        assert response.status_code == 400, path
        assert list(response.json()) == [field], path
    assert alice.get(f"/api/orders/?limit={settings.API_MAX_PAGE_SIZE}").status_code == 200
    assert alice.get("/api/orders/?offset=1000000").json()["results"] == []


def test_the_schema_needs_a_login(traders: tuple[Trader, Trader]) -> None:  # noqa: F811
    assert Client().get("/api/schema/").status_code == 401
    token = Client().get("/api/schema/", HTTP_AUTHORIZATION=f"Token {traders[0].token}")
    assert token.status_code == 200
