"""The API's schema and its viewer: behind the login, viewable in a browser, assets from the site."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders
from django.test import Client

from api.docs import SWAGGER_UI_FILES, check_swagger_ui_asset

pytestmark = pytest.mark.django_db

BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture
def logged_in() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user("reader", password="pw-123456"))
    return client


def test_the_schema_and_the_viewer_need_a_login() -> None:
    anonymous = Client()
    assert anonymous.get("/api/schema/").status_code == 401
    response = anonymous.get("/api/docs/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert anonymous.get("/api/docs/?script=").status_code == 302


def test_a_browser_gets_the_schema_as_json_it_can_show(logged_in: Client) -> None:
    response = logged_in.get("/api/schema/", HTTP_ACCEPT=BROWSER_ACCEPT)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert "Content-Disposition" not in response
    assert json.loads(response.content)["info"]["title"] == "tradingsite API"


def test_yaml_is_plain_text_and_the_standard_media_type_still_works(logged_in: Client) -> None:
    response = logged_in.get("/api/schema/?format=yaml")
    assert response["Content-Type"].startswith("text/plain") and b"openapi:" in response.content
    response = logged_in.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert response["Content-Type"].startswith("application/vnd.oai.openapi") and b"openapi:" in response.content


def test_the_viewer_loads_only_same_origin_files_and_no_inline_code(logged_in: Client) -> None:
    page = logged_in.get("/api/docs/").content.decode()
    assert "cdn" not in page.lower() and "<style" not in page
    assert "<script>" not in page  # every script has a src
    for name in SWAGGER_UI_FILES:
        assert f"/static/vendor/swagger-ui/{name}" in page
        assert finders.find(f"vendor/swagger-ui/{name}")
    script = logged_in.get("/api/docs/?script=")
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")
    assert b"/api/schema/" in script.content


def test_a_missing_viewer_asset_fails_the_system_check(settings, tmp_path: Path) -> None:
    settings.SWAGGER_UI_ASSET_DIR = tmp_path
    (error,) = check_swagger_ui_asset()
    assert error.id == "api.E001" and "npm ci" in error.msg


def test_the_installed_viewer_passes_the_check() -> None:
    assert Path(settings.SWAGGER_UI_ASSET_DIR).is_dir()
    assert check_swagger_ui_asset() == []
