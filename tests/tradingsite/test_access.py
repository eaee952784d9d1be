"""Every page needs a login; health probes do not; metrics need staff or the bearer token."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def user():
    return get_user_model().objects.create_user("trader", password="pw-123-long-enough")


@pytest.mark.parametrize("url", ["/", "/internal/health", "/admin/"])
def test_anonymous_request_is_redirected_to_login(client: Client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_login_page_logs_in_and_shows_the_dashboard(client: Client, user) -> None:
    page = client.get("/login/")
    assert page.status_code == 200 and b"csrfmiddlewaretoken" in page.content
    response = client.post("/login/", {"username": "trader", "password": "pw-123-long-enough"})
    assert response.status_code == 302 and response["Location"] == "/"
    dashboard = client.get("/")
    assert dashboard.status_code == 200
    assert b"Live prices" in dashboard.content


def test_wrong_password_is_a_form_error(client: Client, user) -> None:
    response = client.post("/login/", {"username": "trader", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content


def test_login_form_enforces_csrf(user) -> None:
    strict = Client(enforce_csrf_checks=True)
    response = strict.post("/login/", {"username": "trader", "password": "pw-123-long-enough"})
    assert response.status_code == 403


def test_logout_needs_a_post(client: Client, user) -> None:
    client.force_login(user)
    assert client.get("/logout/").status_code == 405
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_health_probes_answer_without_login(client: Client) -> None:
    assert client.get("/healthz").content == b"ok\n"
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.content.startswith(b"ready\n")


def test_internal_health_is_for_staff_only(client: Client, user) -> None:
    client.force_login(user)
    assert client.get("/internal/health").status_code == 302  # to the admin login
    user.is_staff = True
    user.save()
    body = client.get("/internal/health").json()
    assert body["status"] == "HEALTHY" and body["ready"] is True
    assert body["database"]["status"] == "HEALTHY"


def test_metrics_need_staff_or_the_bearer_token(client: Client, user, settings) -> None:
    settings.METRICS_TOKEN = "scrape-secret"
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    scraped = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret")
    assert scraped.status_code == 200
    assert b"django_http_requests_total_by_method_total" in scraped.content
    client.force_login(user)
    assert client.get("/metrics").status_code == 403
    user.is_staff = True
    user.save()
    assert client.get("/metrics").status_code == 200


def test_metrics_token_unset_never_matches_an_empty_bearer(client: Client, settings) -> None:
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 403
