"""The code form and the OAuth redirect endpoint: state check, CSRF, rate limit, clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from recovery.models import AuthPrompt, BrokerToken
from recovery.services import token_await_auth
from recovery.tokens import TokenKey, TokenKind, TokenState
from recovery.upstox import UpstoxTokenExchange
from tests.recovery.clocks import FakeClock
from tests.recovery.fake_upstox_auth import FakeUpstoxAuth

pytestmark = pytest.mark.django_db(transaction=True)
KEY = TokenKey("upstox", TokenKind.OAUTH)
PASSWORD = "pw-long-enough-123"


@pytest.fixture
def owner() -> Any:
    return get_user_model().objects.create_user("owner", password=PASSWORD)


@pytest.fixture
def prompt(upstox: UpstoxTokenExchange, owner: Any, clock: FakeClock) -> AuthPrompt:
    token_await_auth(key=KEY, reason="expired")
    AuthPrompt.objects.update(owner=owner)
    return AuthPrompt.objects.get()


def logged_in(user: Any, **options: Any) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


def state() -> str:
    return BrokerToken.objects.get(broker="upstox").state


def test_anonymous_users_are_sent_to_login(prompt: AuthPrompt) -> None:
    response = Client().get(f"/recovery/callback/upstox?code=abc&state={prompt.recovery_token}")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_oauth_redirect_with_the_prompts_state_makes_the_token_valid(
    prompt: AuthPrompt, owner: Any, fake_upstox: FakeUpstoxAuth
) -> None:
    response = logged_in(owner).get(
        "/recovery/callback/upstox", {"code": fake_upstox.log_in(), "state": str(prompt.recovery_token)}
    )
    assert response.status_code == 200 and b"Logged in" in response.content
    assert state() == TokenState.VALID
    assert not AuthPrompt.objects.filter(resolved_at__isnull=True).exists()


def test_oauth_redirect_with_a_foreign_or_made_up_state_is_refused_and_spends_nothing(
    prompt: AuthPrompt, fake_upstox: FakeUpstoxAuth
) -> None:
    stranger = get_user_model().objects.create_user("stranger", password=PASSWORD)
    code = fake_upstox.log_in()
    for client, query in [
        (logged_in(stranger), {"code": code, "state": str(prompt.recovery_token)}),  # not their prompt
        (logged_in(prompt.owner), {"code": code, "state": "00000000-0000-0000-0000-000000000000"}),
        (logged_in(prompt.owner), {"code": code, "state": "not-a-uuid"}),
        (logged_in(prompt.owner), {"code": code}),
    ]:
        response = client.get("/recovery/callback/upstox", query)
        assert response.status_code == 400 and b"state mismatch" in response.content
    response = logged_in(prompt.owner).get(
        "/recovery/callback/other-broker", {"code": code, "state": str(prompt.recovery_token)}
    )
    assert response.status_code == 400
    assert fake_upstox.token_requests == [] and state() == TokenState.AWAITING_AUTH


def test_the_broker_reporting_a_login_error_is_shown(prompt: AuthPrompt) -> None:
    response = logged_in(prompt.owner).get(
        "/recovery/callback/upstox", {"state": str(prompt.recovery_token), "error": "access_denied"}
    )
    assert response.status_code == 400 and b"access_denied" in response.content


def test_the_code_form_needs_a_csrf_token(prompt: AuthPrompt, fake_upstox: FakeUpstoxAuth) -> None:
    client = logged_in(prompt.owner, enforce_csrf_checks=True)
    response = client.post(f"/recovery/prompts/{prompt.recovery_token}/code", {"code": fake_upstox.log_in()})
    assert response.status_code == 403
    assert state() == TokenState.AWAITING_AUTH

    page = client.get(f"/recovery/prompts/{prompt.recovery_token}/")
    csrf = page.context["csrf_token"]
    response = client.post(
        f"/recovery/prompts/{prompt.recovery_token}/code",
        {"code": fake_upstox.log_in(), "csrfmiddlewaretoken": str(csrf)},
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert state() == TokenState.VALID


def test_bad_and_reused_codes_show_a_clear_error_and_leave_the_state_alone(
    prompt: AuthPrompt, fake_upstox: FakeUpstoxAuth
) -> None:
    client = logged_in(prompt.owner)
    url = f"/recovery/prompts/{prompt.recovery_token}/code"
    bad = client.post(url, {"code": "made-up"})
    assert bad.status_code == 400 and b"A code works once" in bad.content
    assert state() == TokenState.AWAITING_AUTH

    code = fake_upstox.log_in()
    fake_upstox.fail_next_token = (500, "UDAPI100500")
    failed = client.post(url, {"code": code}, HTTP_ACCEPT="application/json")
    assert failed.status_code == 502 and not failed.json()["ok"]
    reused = client.post(url, {"code": code}, HTTP_ACCEPT="application/json")
    assert reused.status_code == 400 and "log in again" in reused.json()["message"]
    assert state() == TokenState.AWAITING_AUTH
    open_prompt = AuthPrompt.objects.get(resolved_at__isnull=True)
    assert open_prompt.pk == prompt.pk and "works once" in open_prompt.last_error

    empty = client.post(url, {"code": "  "}, HTTP_ACCEPT="application/json")
    assert empty.status_code == 400 and "Paste the code" in empty.json()["message"]


def test_code_attempts_are_rate_limited_per_user(settings, prompt: AuthPrompt, fake_upstox: FakeUpstoxAuth) -> None:
    settings.RECOVERY_CODE_RATE_LIMIT = 3
    client = logged_in(prompt.owner)
    url = f"/recovery/prompts/{prompt.recovery_token}/code"
    statuses = [client.post(url, {"code": f"bad-{n}"}, HTTP_ACCEPT="application/json").status_code for n in range(3)]
    assert statuses == [400, 400, 400]
    limited = client.post(url, {"code": fake_upstox.log_in()}, HTTP_ACCEPT="application/json")
    assert limited.status_code == 429 and "Too many" in limited.json()["message"]
    assert len(fake_upstox.token_requests) == 3  # the limited attempt never reached the broker
    assert state() == TokenState.AWAITING_AUTH


def test_resolved_prompts_refuse_further_codes(prompt: AuthPrompt, fake_upstox: FakeUpstoxAuth) -> None:
    client = logged_in(prompt.owner)
    url = f"/recovery/prompts/{prompt.recovery_token}/code"
    assert client.post(url, {"code": fake_upstox.log_in()}, HTTP_ACCEPT="application/json").status_code == 200
    again = client.post(url, {"code": fake_upstox.log_in()}, HTTP_ACCEPT="application/json")
    assert again.status_code == 404 and "no longer open" in again.json()["message"]


def test_prompt_listing_and_dashboard_show_only_the_users_own_prompts(prompt: AuthPrompt) -> None:
    stranger = get_user_model().objects.create_user("stranger", password=PASSWORD)
    mine = logged_in(prompt.owner).get("/recovery/prompts.json").json()["prompts"]
    assert [p["recovery_token"] for p in mine] == [str(prompt.recovery_token)]
    assert logged_in(stranger).get("/recovery/prompts.json").json() == {"prompts": []}
    assert str(prompt.recovery_token) in logged_in(prompt.owner).get("/").content.decode()
    assert str(prompt.recovery_token) not in logged_in(stranger).get("/").content.decode()
    assert logged_in(stranger).get(f"/recovery/prompts/{prompt.recovery_token}/").status_code == 404


def test_admin_pages_never_show_the_token_or_its_ciphertext(prompt: AuthPrompt, fake_upstox: FakeUpstoxAuth) -> None:
    logged_in(prompt.owner).get(
        "/recovery/callback/upstox", {"code": fake_upstox.log_in(), "state": str(prompt.recovery_token)}
    )
    token = BrokerToken.objects.get(broker="upstox")
    assert token.state == TokenState.VALID
    admin = get_user_model().objects.create_superuser("root", password=PASSWORD)
    client = logged_in(admin)
    pages = [
        client.get("/admin/recovery/brokertoken/").content.decode(),
        client.get(f"/admin/recovery/brokertoken/{token.pk}/change/").content.decode(),
        client.get("/admin/recovery/authprompt/").content.decode(),
    ]
    assert token.fingerprint in pages[1]
    for page in pages:
        assert token.ciphertext not in page
        for secret in fake_upstox.issued:
            assert secret not in page
