"""A trader sweeps a parameter grid in the browser: chooses the grid and the figure to sort by,
starts the sweep, watches its points finish over the websocket, and reads the table best first."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.e2e.conftest import Site, open_dashboard, screenshot
from tests.e2e.site_setup import REPLAY_SYMBOL
from tests.e2e.test_backtest_e2e import recorded_ticks
from tests.e2e.test_csp_browser import COLLECT_VIOLATIONS
from tests.helpers import eventually

# 12 points; on the replay tape (every tick a bar of 10) the bar size changes the trades.
GRID = {"bar_volume": ["10", "20", "30"], "lookback": [2, 3], "hold_bars": [1, 2]}


@pytest.mark.timeout(600)  # the site's setup alone can take minutes on a busy machine
def test_start_a_sweep_watch_its_points_and_read_the_table_sorted_by_the_chosen_figure(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    eventually(lambda: recorded_ticks(site) >= 120, timeout_s=90, interval_s=2)
    page = open_dashboard(browser, site, "demo")
    page.context.add_init_script(COLLECT_VIOLATIONS)  # the pages hold no inline script or style
    now = datetime.now(UTC)

    page.goto(f"{site.base}/backtests/")
    page.click("#new-sweep")
    page.wait_for_url(f"{site.base}/backtests/sweeps/new/")
    page.fill("textarea[name=grid]", '{"lookback": 3}')  # not a list: a form error, no sweep
    page.click("#sweep-form button[type=submit]")
    page.locator('.field-error[data-field="grid"]').first.wait_for()

    page.select_option("select[name=kind]", "volume_breakout")
    page.fill("textarea[name=params]", json.dumps({"cooldown_bars": 0}))
    page.fill("textarea[name=grid]", json.dumps(GRID))
    page.select_option("select[name=metric]", "pnl")
    page.fill("input[name=workers]", "2")
    page.select_option("select[name=instruments]", label=f"replay / {REPLAY_SYMBOL}")
    page.fill("input[name=start]", (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=end]", (now + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=quantity]", "1")
    page.click("#sweep-form button[type=submit]")
    page.wait_for_url(f"{site.base}/backtests/sweeps/*/")
    page.evaluate("window.__notReloaded = true")

    status = page.locator("#sweep-status")
    page.wait_for_function("el => el.dataset.status === 'done'", arg=status.element_handle(), timeout=180_000)
    assert page.locator("#sweep-points").text_content() == "12 / 12 points"
    if status.get_attribute("data-initial-status") != "done":
        # The page opened before the sweep ended: the end came over the websocket, no reload.
        assert page.locator("#sweep").get_attribute("data-socket") == "live"
        assert int(page.locator("#sweep").get_attribute("data-pushes") or 0) >= 1
        assert page.evaluate("window.__notReloaded") is True

    table = page.locator("#sweep-table")
    table.wait_for()
    assert table.get_attribute("data-metric") == "pnl"
    rows = page.locator("#sweep-table tbody tr")
    assert rows.count() == 12
    ranks = [int(text) for text in rows.locator("td:first-child").all_text_contents()]
    assert ranks == list(range(1, 13))
    assert sorted(int(i) for i in [rows.nth(n).get_attribute("data-index") for n in range(12)]) == list(range(12))
    pnls = [Decimal(rows.nth(n).get_attribute("data-value")) for n in range(12)]
    assert pnls == sorted(pnls, reverse=True) and len(set(pnls)) > 1
    screenshot(page, "backtest-sweep")
    assert page.evaluate("() => window.__cspViolations") == []

    # The sweep is listed, and in the API for its owner only.
    sweep_url = page.url
    sweep_id = sweep_url.rstrip("/").rsplit("/", 1)[-1]
    page.goto(f"{site.base}/backtests/")
    assert page.locator(f"#sweeps tr[data-sweep='{sweep_id}']").count() == 1
    api = page.request.get(f"/api/backtest-sweeps/{sweep_id}/").json()
    assert [row["index"] for row in api["results"]] == [int(rows_index) for rows_index in _indexes(page, sweep_url)]
    bob = open_dashboard(browser, site, "bob")
    assert bob.goto(sweep_url).status == 404
    assert bob.request.get(f"/api/backtest-sweeps/{sweep_id}/").status == 404
    bob.context.close()
    page.context.close()


def _indexes(page, url: str) -> list[str]:  # type: ignore[no-untyped-def]
    page.goto(url)
    rows = page.locator("#sweep-table tbody tr")
    return [rows.nth(n).get_attribute("data-index") or "" for n in range(rows.count())]
