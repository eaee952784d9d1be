"""A corpus of bad input against every admin add and change view and every site form.

Each value goes into every field of a form at once (as a superuser, who is offered every
form). The rule: never a 500; and a refused submission (anything but the redirect of a
save) changes nothing in the database, compared row by row (tests.security.database_contents). Each case runs in a
rolled-back transaction on one shared world.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client

from tests.security.database_contents import Contents, changed_tables, database_contents
from tests.security.tenant_world import World, live_db_fixture, world_fixture  # noqa: F401  (the fixtures)

# Thousands of cheap in-process requests on one world: CI runs both databases' walks side by side.
pytestmark = pytest.mark.walk

DEEP = "[" * 3000 + "]" * 3000
CORPUS: dict[str, str] = {
    "empty": "",
    "blank": "   ",
    "sql": "'; DROP TABLE orders_order; --",
    "html": "<script>alert(1)</script>",
    "nul": "a\x00b",
    "nul-json": '{"a": "\\u0000"}',
    "unicode": "\u202e\U0001f4a5\u0301\ufeff",
    "surrogate-json": '{"a": "\\ud800"}',
    "oversized": "x" * 100_000,
    "deep-json": DEEP,
    "deep-object": '{"a":' * 3000 + "1" + "}" * 3000,
    "json-list": "[1]",
    "json-string": '"x"',
    "json-number": "5",
    "json-true": "true",
    "json-null": "null",
    "json-nan": '{"a": NaN}',
    "json-maybe": '{"long_only": "maybe"}',
    "negative": "-1",
    "huge-number": "99999999999999999999999999999999",
    "float-overflow": "1e309",
    "path": "../../etc/passwd",
}
# Fields Django's admin adds around a form; they steer the view, they are not input.
STEERING = {"csrfmiddlewaretoken", "_save", "_continue", "_addanother", "_saveasnew", "action", "select_across"}


_WORLD: list[Contents] = []


def world_contents() -> Contents:
    """The world's contents, read once: every test rolls back to the same world."""
    if not _WORLD:
        _WORLD.append(database_contents())
    return _WORLD[0]


def assert_unchanged(before: Contents, what: str) -> None:
    after = database_contents()
    assert after == before, f"{what} changed the database: {', '.join(changed_tables(before, after))}"


def _admin_views() -> Iterator[tuple[str, str]]:
    for model in admin.site._registry:
        opts = model._meta
        yield f"{opts.app_label}.{opts.model_name}", "add"
        yield f"{opts.app_label}.{opts.model_name}", "change"


def _field_names(html: str) -> list[str]:
    names = re.findall(r'<(?:input|select|textarea)[^>]*\bname="([^"]+)"', html)
    return sorted({name for name in names if name not in STEERING})


@pytest.fixture(scope="module")
def root(world: World, django_db_blocker: Any) -> Client:
    with django_db_blocker.unblock():
        return world.client("root", raise_request_exception=False)


_FIELDS: dict[str, list[str]] = {}


def _form_fields(client: Client, url: str) -> list[str] | None:
    """The input names of the form at `url` (None when the superuser is refused the form)."""
    if url not in _FIELDS:
        form = client.get(url)
        assert form.status_code in (200, 403), f"GET {url}: {form.status_code}"
        _FIELDS[url] = _field_names(form.content.decode()) if form.status_code == 200 else []
    return _FIELDS[url] or None


def _url(world: World, label: str, view: str) -> str:
    app, model = label.split(".")
    if view == "add":
        return f"/admin/{app}/{model}/add/"
    key = model if model in world.ids else None
    assert key is not None, f"the tenant world has no {model} row to change"
    return f"/admin/{app}/{model}/{world.ids[key]}/change/"


def test_the_corpus_covers_every_registered_admin() -> None:
    labels = {label for label, _ in _admin_views()}
    assert len(labels) == len(admin.site._registry) and labels  # a new admin is walked without an edit here


@pytest.mark.django_db
@pytest.mark.parametrize("value_name", list(CORPUS))
@pytest.mark.parametrize(("label", "view"), list(_admin_views()))
def test_admin_refuses_bad_input_cleanly(world: World, root: Client, label: str, view: str, value_name: str) -> None:
    url = _url(world, label, view)
    names = _form_fields(root, url) or ["name"]  # a refused form still gets a POST
    before = world_contents()
    response = root.post(url, dict.fromkeys(names, CORPUS[value_name]) | {"_save": "Save"})
    assert response.status_code != 500, f"POST {url} with {value_name}: 500"
    assert response.status_code in (200, 302, 400, 403), f"POST {url} with {value_name}: {response.status_code}"
    if response.status_code != 302:
        assert_unchanged(before, f"POST {url} with {value_name} was refused but")


# --- the site's own forms ----------------------------------------------------------------

SITE_FORMS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # name: (url, fields given the value, role)
    "login": ("/login/", ("username", "password"), "anonymous"),
    "admin-login": ("/admin/login/", ("username", "password"), "anonymous"),
    "prompt-code": ("/recovery/prompts/{recovery_token}/code", ("code",), "owner"),
    "strategy-toggle": ("/controls/strategies/{strategy}/", ("confirm", "enabled", "reason"), "owner"),
    "trade-setting-toggle": ("/controls/trade-settings/{tradesetting}/", ("confirm", "enabled", "reason"), "owner"),
    "kill-switch": ("/controls/kill-switch/{account}/", ("confirm", "engaged", "reason"), "owner"),
    "kill-switch-scope": ("/controls/kill-switch/{value}/", ("confirm", "engaged"), "owner"),
    "intent-release": ("/controls/intents/{client_order_id}/release/", ("confirm", "reason"), "owner"),
    "intent-wait": ("/controls/intents/{client_order_id}/wait/", ("confirm", "reason"), "owner"),
    "password-change": (
        "/admin/password_change/",
        ("old_password", "new_password1", "new_password2"),
        "owner",
    ),
}


def _site_form_cases() -> list[tuple[str, str]]:
    # A value that cannot be one path segment is not sent in the URL (it would name another route).
    return [
        (form_name, value_name)
        for form_name, (url, _, _) in SITE_FORMS.items()
        for value_name, value in CORPUS.items()
        if "{value}" not in url or not ("/" in value or "\x00" in value or not value.strip())
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(("form_name", "value_name"), _site_form_cases())
def test_site_forms_refuse_bad_input_cleanly(live_db: World, form_name: str, value_name: str) -> None:
    world = live_db
    url, fields, role = SITE_FORMS[form_name]
    value = CORPUS[value_name]
    url = url.format(**world.ids, value="{value}").replace("{value}", value[:200])
    client = world.client(role, raise_request_exception=False)
    before = database_contents()
    response = client.post(url, dict.fromkeys(fields, value))
    assert response.status_code != 500, f"{form_name} with {value_name}: 500"
    assert response.status_code < 500, f"{form_name} with {value_name}: {response.status_code}"
    assert_unchanged(before, f"{form_name} with {value_name}")


@pytest.mark.django_db
@pytest.mark.parametrize("value_name", list(CORPUS))
def test_the_oauth_callback_refuses_bad_input_cleanly(live_db: World, value_name: str) -> None:
    world = live_db
    client = world.client("owner", raise_request_exception=False)
    value = CORPUS[value_name][:5000]
    before = database_contents()
    for params in (
        {"code": value, "state": value},
        {"code": value, "state": world.ids["recovery_token"]},
        {"error": value, "error_description": value, "state": world.ids["recovery_token"]},
    ):
        response = client.get("/recovery/callback/upstox", params)
        assert response.status_code in (400, 409, 429), f"callback with {value_name}: {response.status_code}"
    assert_unchanged(before, f"the callback with {value_name}")
