"""The alerts page: channels per user, validated forms, CSRF, and a URL secret never shown back."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alerts.channels import ChannelUrlRefused, channel_url_check, channel_url_decrypt
from alerts.models import Alert, AlertKind, NotificationChannel
from alerts.services import channel_create

pytestmark = pytest.mark.django_db

SECRET_URL = "tgram://123456789:AAHsupersecretbottoken/987654"


def client_for(username: str, **kwargs: bool) -> tuple[Client, int]:
    user = get_user_model().objects.create_user(username, password="pw-123456", **kwargs)
    client = Client(enforce_csrf_checks=kwargs.pop("csrf", False))
    client.force_login(user)
    return client, user.pk


def add(client: Client, **fields: str) -> object:
    data = {"name": "phone", "url": SECRET_URL, "enabled": "on", "notify_fills": "on", **fields}
    return client.post("/alerts/", data)


def test_a_channel_is_stored_encrypted_and_its_secret_never_rendered() -> None:
    client, user_id = client_for("ann")
    response = add(client)
    assert response.status_code == 302
    channel = NotificationChannel.objects.get(owner_id=user_id)
    assert "supersecret" not in channel.url_ciphertext and "supersecret" not in channel.url_display
    assert channel_url_decrypt(channel.url_ciphertext) == SECRET_URL
    assert (channel.notify_fills, channel.notify_kill_switches) == (True, False)
    for page in ("/alerts/", f"/alerts/channels/{channel.pk}/"):
        body = client.get(page).content.decode()
        assert "supersecret" not in body and channel.url_display in body


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("", "enter a notification URL"),
        ("http://example.com/hook", "the scheme must be one of"),
        ("file:///etc/passwd", "the scheme must be one of"),
        ("json://", "apprise cannot use"),
        ("tgram://", "apprise cannot use"),
        ("json://127.0.0.1/" + "x" * 2100, "at most"),
    ],
)
def test_an_unusable_url_is_a_form_error(url: str, error: str) -> None:
    client, user_id = client_for("bob")
    response = add(client, url=url)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert not NotificationChannel.objects.filter(owner_id=user_id).exists()


def test_a_second_channel_with_the_same_name_is_a_form_error() -> None:
    client, _ = client_for("cat")
    assert add(client).status_code == 302
    response = add(client)
    assert response.status_code == 400 and "already have a channel with this name" in response.content.decode()


def test_forms_need_the_csrf_token() -> None:
    user = get_user_model().objects.create_user("dan", password="pw-123456")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert add(client).status_code == 403
    channel = channel_create(owner_id=user.pk, name="x", url=SECRET_URL)
    assert client.post(f"/alerts/channels/{channel.pk}/delete/").status_code == 403
    assert NotificationChannel.objects.filter(pk=channel.pk).exists()


def test_another_users_channel_cannot_be_seen_changed_tested_or_deleted() -> None:
    owner = get_user_model().objects.create_user("owner", password="pw-123456")
    channel = channel_create(owner_id=owner.pk, name="owner-phone", url=SECRET_URL, notify_fills=True)
    Alert.objects.create(
        owner=owner,
        channel=channel,
        kind=AlertKind.FILL,
        source="fill:1",
        title="owner-only",
        body="b",
        next_attempt_at=channel.created_at,
    )
    client, _ = client_for("mallory")
    assert client.get(f"/alerts/channels/{channel.pk}/").status_code == 404
    assert client.post(f"/alerts/channels/{channel.pk}/", {"name": "mine", "enabled": "on"}).status_code == 404
    assert client.post(f"/alerts/channels/{channel.pk}/test/").status_code == 404
    assert client.post(f"/alerts/channels/{channel.pk}/delete/").status_code == 404
    page = client.get("/alerts/").content.decode()
    assert "owner-phone" not in page and "owner-only" not in page
    assert NotificationChannel.objects.get(pk=channel.pk).name == "owner-phone"


def test_editing_without_a_url_keeps_the_stored_one() -> None:
    client, user_id = client_for("eve")
    add(client)
    channel = NotificationChannel.objects.get(owner_id=user_id)
    response = client.post(f"/alerts/channels/{channel.pk}/", {"name": "renamed", "notify_health": "on"})
    assert response.status_code == 302
    channel.refresh_from_db()
    assert channel.name == "renamed" and not channel.enabled and channel.notify_health
    assert channel_url_decrypt(channel.url_ciphertext) == SECRET_URL


def test_the_history_shows_each_alert_with_its_delivery_state() -> None:
    client, user_id = client_for("fay")
    add(client)
    channel = NotificationChannel.objects.get(owner_id=user_id)
    assert client.post(f"/alerts/channels/{channel.pk}/test/").status_code == 302
    Alert.objects.filter(channel=channel).update(attempts=2, last_error="the target refused or did not answer")
    body = client.get("/alerts/").content.decode()
    assert "tradingsite test message" in body and "Pending" in body and "the target refused" in body


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_any_text_as_a_url_is_accepted_or_refused_by_name(url: str) -> None:
    try:
        display = channel_url_check(url)
    except ChannelUrlRefused:
        return
    assert "://" in display and len(display) <= 300
