"""Nobody but a prompt's owner (or a superuser, for an unowned prompt) sees or answers it.

Checked on every way a prompt leaves the server: the API, /recovery/prompts.json, the
prompt page, the code form, the OAuth callback and the websocket `prompt` pushes; and
when a token changes owner, its open prompt follows with a new recovery token.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from dashboard.admin import OWNER_CHANGE_ACTION
from dashboard.models import ControlAudit
from recovery.brokers import use_exchanges
from recovery.models import AuthPrompt, BrokerToken, PromptResolution
from recovery.services import token_await_auth
from recovery.tokens import TokenKey, TokenKind, TokenState
from recovery.upstox import UpstoxTokenExchange
from recovery.views import BROKER_REMOVED
from tests.recovery.clocks import FakeClock
from tests.recovery.fake_upstox_auth import FakeUpstoxAuth
from tradingsite.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)
KEY = TokenKey("upstox", TokenKind.OAUTH)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")  # a browser sends both; the origin must be the host's own


def user(name: str, **flags: bool) -> Any:
    return get_user_model().objects.create_user(name, password="pw-long-enough-123", **flags)


def client_of(person: Any) -> Client:
    client = Client()
    client.force_login(person)
    return client


def open_prompt() -> AuthPrompt:
    return AuthPrompt.objects.get(resolved_at__isnull=True)


def token_owned_by(owner: Any) -> BrokerToken:
    token = BrokerToken.objects.create(broker="upstox", kind="oauth", owner=owner, reason="no token yet")
    return token


def visible_tokens(client: Client) -> dict[str, set[str]]:
    """The recovery tokens of the prompts `client` is shown, per channel."""
    api = {row["recovery_token"] for row in client.get("/api/prompts/").json()["results"]}
    page = {row["recovery_token"] for row in client.get("/recovery/prompts.json").json()["prompts"]}
    return {"api": api, "prompts.json": page}


def test_an_owned_prompt_is_shown_to_its_owner_only(upstox: UpstoxTokenExchange, clock: FakeClock) -> None:
    alice, bob, ops = user("alice"), user("bob"), user("ops", is_staff=True)
    root = user("root", is_staff=True, is_superuser=True)
    token_owned_by(alice)
    token_await_auth(key=KEY, reason="expired")
    prompt = open_prompt()
    assert prompt.owner_id == alice.pk
    mine = str(prompt.recovery_token)
    assert visible_tokens(client_of(alice)) == {"api": {mine}, "prompts.json": {mine}}
    for outsider in (bob, ops, root):
        client = client_of(outsider)
        assert visible_tokens(client) == {"api": set(), "prompts.json": set()}, outsider.username
        assert client.get(f"/api/prompts/{prompt.pk}/").status_code == 404
        assert client.get(f"/recovery/prompts/{mine}/").status_code == 404
        answer = client.post(f"/recovery/prompts/{mine}/code", {"code": "abc"}, HTTP_ACCEPT="application/json")
        assert answer.status_code == 404
        callback = client.get("/recovery/callback/upstox", {"code": "abc", "state": mine})
        assert callback.status_code == 400
    assert BrokerToken.objects.get().state == TokenState.AWAITING_AUTH
    assert client_of(alice).get(f"/recovery/prompts/{mine}/").status_code == 200


def test_an_unowned_prompt_is_for_superusers_not_for_staff(upstox: UpstoxTokenExchange, clock: FakeClock) -> None:
    ops, root = user("ops", is_staff=True), user("root", is_staff=True, is_superuser=True)
    token_await_auth(key=KEY, reason="first start")
    unowned = str(open_prompt().recovery_token)
    assert visible_tokens(client_of(ops)) == {"api": set(), "prompts.json": set()}
    assert visible_tokens(client_of(root)) == {"api": {unowned}, "prompts.json": {unowned}}


async def _browser(person: Any) -> WebsocketCommunicator:
    client = await sync_to_async(client_of)(person)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    communicator = WebsocketCommunicator(application, "/ws/dashboard/", headers=[ORIGIN, HOST, (b"cookie", cookie)])
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def test_prompt_pushes_reach_only_the_owner(upstox: UpstoxTokenExchange, clock: FakeClock) -> None:
    alice, ops = await database_sync_to_async(user)("alice"), await database_sync_to_async(user)("ops", is_staff=True)
    await database_sync_to_async(token_owned_by)(alice)
    alice_browser, ops_browser = await _browser(alice), await _browser(ops)
    try:
        await database_sync_to_async(token_await_auth)(key=KEY, reason="expired")
        message = await alice_browser.receive_json_from(timeout=5)
        assert message["type"] == "prompt" and message["action"] == "open"
        assert message["prompt"]["recovery_token"] == str((await database_sync_to_async(open_prompt)()).recovery_token)
        assert await ops_browser.receive_nothing(timeout=0.5)
    finally:
        await alice_browser.disconnect()
        await ops_browser.disconnect()


async def test_a_new_owner_gets_a_fresh_prompt_and_the_old_audience_is_told_to_drop_it(
    upstox: UpstoxTokenExchange, clock: FakeClock
) -> None:
    make = database_sync_to_async(user)
    alice, root = await make("alice"), await make("root", is_staff=True, is_superuser=True)
    await database_sync_to_async(token_await_auth)(key=KEY, reason="first start")  # unowned: root's
    old = await database_sync_to_async(open_prompt)()
    token = await database_sync_to_async(BrokerToken.objects.get)()
    alice_browser, root_browser = await _browser(alice), await _browser(root)
    try:
        admin = await sync_to_async(client_of)(root)
        response = await sync_to_async(admin.post)(
            f"/admin/recovery/brokertoken/{token.pk}/change/", {"owner": alice.pk, "_save": "Save"}
        )
        assert response.status_code == 302, response.content
        cleared = await root_browser.receive_json_from(timeout=5)
        assert (cleared["type"], cleared["action"], cleared["recovery_token"]) == (
            "prompt",
            "clear",
            str(old.recovery_token),
        )
        opened = await alice_browser.receive_json_from(timeout=5)
        assert opened["action"] == "open"
        assert opened["prompt"]["recovery_token"] != str(old.recovery_token)
        assert await alice_browser.receive_nothing(timeout=0.3)
        assert await root_browser.receive_nothing(timeout=0.3)
    finally:
        await alice_browser.disconnect()
        await root_browser.disconnect()

    def check() -> None:
        new = open_prompt()
        assert new.owner_id == alice.pk and str(new.recovery_token) in new.login_url
        assert AuthPrompt.objects.get(pk=old.pk).resolution == PromptResolution.SUPERSEDED
        audit = ControlAudit.objects.get(action=OWNER_CHANGE_ACTION)
        assert (audit.actor_id, audit.before, audit.after) == (
            root.pk,
            {"owner_id": None},
            {"owner_id": alice.pk},
        )
        # The old recovery token (seen by the old audience) answers nobody now.
        answer = client_of(root).post(f"/recovery/prompts/{old.recovery_token}/code", {"code": "abc"})
        assert answer.status_code == 404

    await database_sync_to_async(check)()


def test_ask_for_a_new_login_does_not_reuse_an_unowned_prompt(upstox: UpstoxTokenExchange, clock: FakeClock) -> None:
    alice, root = user("alice"), user("root", is_staff=True, is_superuser=True)
    token_await_auth(key=KEY, reason="first start")
    unowned = open_prompt()
    assert unowned.owner_id is None
    token = BrokerToken.objects.get()
    BrokerToken.objects.filter(pk=token.pk).update(owner=alice)  # e.g. set by a data migration
    response = client_of(root).post(
        "/admin/recovery/brokertoken/",
        {"action": "request_login", "_selected_action": [token.pk]},
    )
    assert response.status_code == 302
    fresh = open_prompt()
    assert fresh.owner_id == alice.pk and fresh.recovery_token != unowned.recovery_token
    assert AuthPrompt.objects.get(pk=unowned.pk).resolution == PromptResolution.SUPERSEDED


def test_staff_cannot_give_their_token_or_account_to_someone_else(upstox: UpstoxTokenExchange) -> None:
    from django.contrib.auth.models import Permission

    from orders.models import Account

    ops, bob = user("ops", is_staff=True), user("bob")
    ops.user_permissions.set(Permission.objects.all())
    token = token_owned_by(ops)
    account = Account.objects.create(owner=ops, name="ops-main", allocated_capital="100")
    admin = client_of(ops)
    admin.post(f"/admin/recovery/brokertoken/{token.pk}/change/", {"owner": bob.pk, "_save": "Save"})
    assert BrokerToken.objects.get().owner_id == ops.pk
    page = admin.get(f"/admin/orders/account/{account.pk}/change/").content.decode()
    assert f'value="{bob.pk}"' not in page  # bob is not even offered
    response = admin.post(
        f"/admin/orders/account/{account.pk}/change/",
        {
            "name": "ops-main",
            "owner": bob.pk,
            "broker": account.broker,
            "allocated_capital": "100",
            "currency": account.currency,
            "_save": "Save",
        },
    )
    assert response.status_code == 200 and b"Select a valid choice" in response.content
    assert Account.objects.get().owner_id == ops.pk
    assert not ControlAudit.objects.filter(action=OWNER_CHANGE_ACTION).exists()


def test_a_removed_broker_answers_a_clear_error_not_a_500(upstox: UpstoxTokenExchange, clock: FakeClock) -> None:
    alice = user("alice")
    token_owned_by(alice)
    token_await_auth(key=KEY, reason="expired")
    recovery_token = str(open_prompt().recovery_token)
    client = client_of(alice)
    client.raise_request_exception = False
    with use_exchanges([]):  # the broker's settings were removed and the site restarted
        answer = client.post(
            f"/recovery/prompts/{recovery_token}/code", {"code": "abc"}, HTTP_ACCEPT="application/json"
        )
        assert answer.status_code == 409 and answer.json() == {"ok": False, "message": BROKER_REMOVED}
        page = client.post(f"/recovery/prompts/{recovery_token}/code", {"code": "abc"})
        assert page.status_code == 409 and "no longer configured" in page.content.decode()
        callback = client.get("/recovery/callback/upstox", {"code": "abc", "state": recovery_token})
        assert callback.status_code == 409 and "no longer configured" in callback.content.decode()
    assert BrokerToken.objects.get().state == TokenState.AWAITING_AUTH


def test_the_fake_broker_still_logs_the_new_owner_in(
    upstox: UpstoxTokenExchange, clock: FakeClock, fake_upstox: FakeUpstoxAuth
) -> None:
    alice, root = user("alice"), user("root", is_staff=True, is_superuser=True)
    token_await_auth(key=KEY, reason="first start")
    token = BrokerToken.objects.get()
    client_of(root).post(f"/admin/recovery/brokertoken/{token.pk}/change/", {"owner": alice.pk, "_save": "Save"})
    fresh = str(open_prompt().recovery_token)
    response = client_of(alice).get("/recovery/callback/upstox", {"code": fake_upstox.log_in(), "state": fresh})
    assert response.status_code == 200
    assert BrokerToken.objects.get().state == TokenState.VALID
