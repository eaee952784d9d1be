"""The depth view in a browser, live: a Tabdeal feed added with `feed add`, streamed by the real
site (`runsite` with Redis) from the local fake venue, its books published to Redis and
drawn as a bids/asks ladder that follows the venue, the REST fallback and back."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.e2e.conftest import ARTIFACTS, PASSWORD, ROOT, free_port, screenshot
from tests.fakes.tabdeal import FakeTabdeal
from tests.helpers import wait_site_ready
from tests.helpers_migrated import migrated_var_dir

pytestmark = pytest.mark.needs_redis

BTC = "BTC_USDT"


class ThreadedFakeTabdeal:
    """The fake venue on its own event loop thread: the browser's sync API owns this one."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-tabdeal", daemon=True)
        self.fake = FakeTabdeal()

    def __enter__(self) -> ThreadedFakeTabdeal:
        self._thread.start()
        self.call(self.fake.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        self.call(self.fake.__aexit__(None, None, None))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def call(self, step: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(step, self._loop)
        return future.result(timeout=10)

    def do(self, action: Any, *args: Any) -> None:
        async def run() -> None:
            action(*args)

        self.call(run())


@dataclass
class DepthSite:
    base: str
    venue: ThreadedFakeTabdeal


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def depth_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DepthSite]:
    var_dir: Path = tmp_path_factory.mktemp("e2e-depth")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(
        {
            "VAR_DIR": str(var_dir),
            "REDIS_URL": settings.REDIS_URL,
            # Names of its own on the shared Redis: no other test hears this site's books.
            "REDIS_NAMESPACE": f"e2e{uuid.uuid4().hex[:10]}",
            "MARKET_DATA_SWEEP_S": "0.2",
            "MARKET_DATA_FALLBACK_MIN_POLL_S": "0.2",
            "MARKET_DATA_REST_PER_MINUTE": "600",
            "FEED_LEASE_TTL_S": "120",  # as the e2e site: a loaded machine must not stop this one
        }
    )
    with ThreadedFakeTabdeal() as venue:
        venue.do(venue.fake.set_book, BTC, [("96712.40", "0.015"), ("96712.3", "1.2")], [("96712.5", "0.8")])
        migrated_var_dir(var_dir)
        added = _manage(
            env,
            *("feed", "add", "tab", "--venue", "tabdeal", "--symbols", BTC),
            *("--ws-url", venue.fake.ws_url, "--rest-url", venue.fake.rest_url),
        )
        assert "feed tab: added (tabdeal, enabled)" in added
        user = f"from django.contrib.auth.models import User; User.objects.create_user('trader', password={PASSWORD!r})"
        _manage(env, "shell", "-c", user)
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
            yield DepthSite(base, venue)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shutil.copy(var_dir / "runsite.log", ARTIFACTS / "runsite-depth.log")


def _ladder(page: Any, side: str) -> list[list[str]]:
    rows = page.locator(f"#depth-{side} tbody tr")
    return [[cell.strip() for cell in rows.nth(n).locator("td").all_text_contents()] for n in range(rows.count())]


def test_the_depth_view_follows_the_venue_and_shows_the_rest_fallback(depth_site: DepthSite, browser: Any) -> None:
    context = browser.new_context(base_url=depth_site.base, viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto("/markets/depth/")  # login first: the page is for logged-in users only
    page.wait_for_url("**/login/**")
    page.fill("input[name=username]", "trader")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto("/markets/depth/")
    page.click(f"text={BTC}")
    page.wait_for_url("**/markets/*/depth/")

    state = page.locator("#depth-state")
    page.wait_for_function("el => el.textContent.trim() === 'WS HEALTHY'", arg=state.element_handle())
    # The levels exactly as the venue sent them, as values (trailing zeros are not digits).
    assert _ladder(page, "bids") == [["96712.4", "0.015"], ["96712.3", "1.2"]]
    assert _ladder(page, "asks") == [["96712.5", "0.8"]]

    depth_site.venue.do(depth_site.venue.fake.set_book, BTC, [("96650.5", "3")], [("96651", "0.000000000001")])
    # The rows are rebuilt on every refresh: ask the document, not an element handle.
    page.wait_for_function("() => document.querySelector('#depth-asks tbody td')?.textContent === '96651'")
    assert _ladder(page, "asks") == [["96651", "0.000000000001"]]
    screenshot(page, "depth-live")

    # The socket goes quiet: the key expires, REST serves it, and the page says so.
    depth_site.venue.do(depth_site.venue.fake.go_silent)
    page.wait_for_function("el => el.textContent.trim() === 'REST DEGRADED'", arg=state.element_handle())
    assert "polling REST" in page.locator("#depth-reason").text_content()
    assert _ladder(page, "bids") == [["96650.5", "3"]]
    screenshot(page, "depth-rest-fallback")

    depth_site.venue.do(depth_site.venue.fake.resume)
    page.wait_for_function("el => el.textContent.trim() === 'WS HEALTHY'", arg=state.element_handle())
    context.close()
