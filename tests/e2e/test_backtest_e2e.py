"""A trader backtests in the browser: starts a run over the site's recorded ticks from the
form, watches its progress arrive over the websocket, reads the report (figures, equity
curve, candles with fills, trades), and compares two runs side by side."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from feeds.models import Instrument, Tick
from tests.e2e.conftest import Site, open_dashboard, screenshot
from tests.e2e.site_setup import REPLAY_SYMBOL
from tests.e2e.test_csp_browser import COLLECT_VIOLATIONS
from tests.helpers import eventually

BREAKOUT = {"bar_volume": "10", "lookback": 3, "hold_bars": 2, "cooldown_bars": 0}


def recorded_ticks(site: Site) -> int:
    query = (
        f"SELECT COUNT(*) FROM {Tick._meta.db_table} JOIN {Instrument._meta.db_table} i ON i.id = instrument_id"
        " WHERE i.venue_symbol = ?"
    )
    return int(site.sql(query, REPLAY_SYMBOL)[0][0])


def start_run(page, site: Site, params: dict) -> str:  # type: ignore[no-untyped-def]
    """Fill the form and start a run; return the run page's URL."""
    now = datetime.now(UTC)
    page.goto(f"{site.base}/backtests/")
    page.click("#new-run")
    page.select_option("select[name=kind]", "volume_breakout")
    page.fill("textarea[name=params]", json.dumps(params))
    page.select_option("select[name=instruments]", label=f"replay / {REPLAY_SYMBOL}")
    page.fill("input[name=start]", (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=end]", (now + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("input[name=quantity]", "1")
    page.click("#run-form button[type=submit]")
    page.wait_for_url(f"{site.base}/backtests/*/")
    return page.url


@pytest.mark.timeout(600)  # the site's setup alone can take minutes on a busy machine
def test_start_a_backtest_watch_its_progress_and_compare_two_runs(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    eventually(lambda: recorded_ticks(site) >= 120, timeout_s=90, interval_s=0.5)
    page = open_dashboard(browser, site, "demo")
    page.context.add_init_script(COLLECT_VIOLATIONS)  # the pages hold no inline script or style

    # A bad value comes back as a form error, not a run.
    page.goto(f"{site.base}/backtests/new/")
    page.fill("textarea[name=params]", '{"lookback": "many"}')
    page.click("#run-form button[type=submit]")
    page.locator('.field-error[data-field="params"]').first.wait_for()

    first = start_run(page, site, BREAKOUT)
    page.evaluate("window.__notReloaded = true")
    status = page.locator("#run-status")
    page.wait_for_function("el => el.dataset.status === 'done'", arg=status.element_handle(), timeout=60_000)
    ticks = page.locator("#run-ticks").text_content()
    done, total = (int(n) for n in ticks.split(" ticks")[0].split(" / "))
    assert done == total >= 120
    assert page.locator("#run-progress").get_attribute("value") is not None
    # The report arrives in place: no reload, figures, both charts drawn, the trades listed.
    page.locator("#figures").wait_for()
    assert page.evaluate("window.__notReloaded") is True
    if status.get_attribute("data-initial-status") != "done":
        # The page opened before the run ended: the end came over the websocket.
        assert page.locator("#run").get_attribute("data-socket") == "live"
    page.wait_for_function("() => Number(document.getElementById('equity-chart').dataset.points) > 1")
    page.wait_for_function("() => Number(document.getElementById('candle-chart').dataset.candles) > 1")
    assert int(page.locator("#candle-chart").get_attribute("data-markers")) > 0
    assert page.locator("#trades tbody tr").count() > 0
    assert page.locator("#candle-chart canvas").count() > 0
    screenshot(page, "backtest-run")
    assert page.evaluate("() => window.__cspViolations") == []

    # The result page opened afresh draws from the stored report.
    page.goto(first)
    page.wait_for_function("() => Number(document.getElementById('equity-chart').dataset.points) > 1")

    second = start_run(page, site, BREAKOUT | {"lookback": 5})
    page.wait_for_function("() => document.getElementById('run-status').dataset.status === 'done'", timeout=60_000)
    page.goto(f"{site.base}/backtests/")
    ids = [url.rstrip("/").rsplit("/", 1)[-1] for url in (first, second)]
    for run_id in ids:
        page.check(f".compare-pick[value='{run_id}']")
    page.click("#compare-button")
    page.wait_for_url(f"{site.base}/backtests/compare/*")
    assert page.locator(".compare-side").count() == 2
    assert page.locator(".compare-side .figures").count() == 2
    page.wait_for_function(
        "() => [...document.querySelectorAll('.compare-equity')].every((box) => Number(box.dataset.points) > 1)"
    )
    screenshot(page, "backtest-compare")
    assert page.evaluate("() => window.__cspViolations") == []

    # Another user opens neither run.
    bob = open_dashboard(browser, site, "bob")
    assert bob.goto(first).status == 404
    assert bob.request.get(f"/api/backtests/{ids[0]}/").status == 404
    bob.context.close()
    page.context.close()
