"""Browser tests: the real site (`manage.py runsite`) on a free port, driven by Debian's Chromium.

Without Debian's chromium (apt-get install chromium; CHROMIUM_PATH names another build)
these tests skip, and fail under REQUIRE_SERVICES=1. One site per session in a temp VAR_DIR (SQLite, in-memory channel layer: the embedded
default), a local fake of the Upstox login endpoints for the auth-code prompt, and a
fresh browser context per user. Screenshots go to test-artifacts/e2e/.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import chromium_path
from tests.helpers import wait_site_ready
from tests.helpers_migrated import migrated_var_dir
from tests.recovery.fake_upstox_auth import DIALOG_PATH, TOKEN_PATH, FakeUpstoxAuth

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
HERE = Path(__file__).resolve().parent
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "e2e-password-4242"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every browser test needs chromium: without it they skip, or fail under REQUIRE_SERVICES=1.
    # The `site` fixture's site is always the embedded default; a test that hands its site
    # Redis (needs_redis) depends on the pass it runs in.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.needs_chromium)
            if item.get_closest_marker("needs_redis") is None:
                item.add_marker(pytest.mark.embedded_site)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Site:
    base: str
    env: dict[str, str]
    demo_account: int
    bob_account: int
    fake_upstox: FakeUpstoxAuth

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def sql(self, query: str, *params: object) -> list[tuple[Any, ...]]:
        """Read the site's own SQLite database in this process (a `manage.py shell` costs a Django start)."""
        with closing(sqlite3.connect(Path(self.env["VAR_DIR"]) / "db.sqlite3", timeout=30)) as connection:
            return connection.execute(query, params).fetchall()


@pytest.fixture(scope="package")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    var_dir = tmp_path_factory.mktemp("e2e-site")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    fake = FakeUpstoxAuth(
        client_id="e2e-app", client_secret="e2e-app-secret", redirect_uri=f"{base}/recovery/callback/upstox"
    ).start()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(
        {
            "VAR_DIR": str(var_dir),
            "DASHBOARD_PUSH_INTERVAL_S": "0.1",
            "DASHBOARD_BROWSER_INTERVAL_S": "0.2",
            "PROCESSOR_RECONCILE_INTERVAL_S": "0.5",
            # The browser tests test pages, not feed ownership (tests/feeds covers leases): on
            # a loaded CI machine a renewal waiting on SQLite's writer must not stop the site.
            "FEED_LEASE_TTL_S": "120",
            "UPSTOX_CLIENT_ID": fake.client_id,
            "UPSTOX_CLIENT_SECRET": fake.client_secret,
            "UPSTOX_REDIRECT_URI": fake.redirect_uri,
            "UPSTOX_AUTHORIZE_URL": fake.url + DIALOG_PATH,
            "UPSTOX_TOKEN_URL": fake.url + TOKEN_PATH,
        }
    )
    migrated_var_dir(var_dir)
    setup = (
        "import django; django.setup(); from tests.e2e.site_setup import main; "
        f"main({str(var_dir)!r}, {PASSWORD!r}, {int(time.time() * 1000)})"
    )
    out = subprocess.run(
        [sys.executable, "-c", setup],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "tradingsite.settings"},
        check=True,
        timeout=300,
        capture_output=True,
        text=True,
    ).stdout
    accounts = json.loads(out.strip().splitlines()[-1])
    log = (var_dir / "runsite.log").open("w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.run_site", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_site_ready(base, process, timeout_s=90)
        yield Site(base, env, accounts["demo_account"], accounts["bob_account"], fake)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        fake.stop()
        log.close()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(var_dir / "runsite.log", ARTIFACTS / "runsite.log")


@pytest.fixture(scope="package", autouse=True)
def orm_beside_playwright() -> Iterator[None]:
    """Playwright's sync API runs an event loop in this thread; the ORM must not object.

    Only while the browser tests run: set at import time it would leak into every
    other test of the session (and their subprocesses).
    """
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if previous is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def open_dashboard(browser: object, site: Site, username: str, *, socket_route=None):  # type: ignore[no-untyped-def]
    """Log `username` in through the login form in a fresh context; return the dashboard page.

    `socket_route`, when given, is Playwright's handler for the dashboard socket (context.route_web_socket).
    """
    context = browser.new_context(base_url=site.base, viewport={"width": 1500, "height": 1000})  # type: ignore[attr-defined]
    if socket_route is not None:
        context.route_web_socket("**/ws/dashboard/", socket_route)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{site.base}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{site.base}/")
    page.wait_for_selector("#connection[data-state=live]")
    return page


def screenshot(page, name: str, *, full_page: bool = True) -> Path:  # type: ignore[no-untyped-def]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
