"""A trader sweeps a parameter grid in the browser: chooses the grid and the figure to sort by,
starts the sweep, watches its points finish over the websocket, and reads the table best first."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.e2e.conftest import Site, open_dashboard, screenshot
from tests.e2e.test_csp_browser import COLLECT_VIOLATIONS

GRID = {"fast": [2, 3, 4, 5], "slow": [8, 12, 20]}  # 12 points of the EMA crossover's periods
WALK_SYMBOL = "WALK-USD"

# A seeded random walk recorded on the replay feed over the last half hour (an instrument
# of its own, not streamed): EMA crossings that differ with the periods.
RECORD_WALK = f"""
import random, time
from decimal import Decimal
from feeds.market import parse_fixed
from feeds.models import Feed, Instrument, Tick
instrument, created = Instrument.objects.get_or_create(
    feed=Feed.objects.get(name="replay"), venue_symbol={WALK_SYMBOL!r},
    defaults={{"symbol": {WALK_SYMBOL!r}, "tick_size": Decimal("0.01"), "lot_size": Decimal("0.001")}},
)
if created:
    rng = random.Random(7)
    price, ts = 100.0, time.time_ns() - 1_800 * 10**9
    rows = []
    for n in range(1_500):
        price *= 1 + rng.gauss(0, 0.002)
        ts += rng.randint(100, 1_000) * 10**6
        rows.append(Tick(instrument=instrument, ts_event=ts, ts_recv=ts, price=parse_fixed(f"{{price:.2f}}"),
                         volume=parse_fixed(str(rng.randint(1, 40) / 10)), trade_id=str(n + 1)))
    Tick.objects.bulk_create(rows)
print(instrument.pk)
"""


@pytest.mark.timeout(600)  # the site's setup alone can take minutes on a busy machine
def test_start_a_sweep_watch_its_points_and_read_the_table_sorted_by_the_chosen_figure(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    site.manage("shell", "-c", RECORD_WALK)
    page = open_dashboard(browser, site, "demo")
    page.context.add_init_script(COLLECT_VIOLATIONS)  # the pages hold no inline script or style
    now = datetime.now(UTC)

    page.goto(f"{site.base}/backtests/")
    page.click("#new-sweep")
    page.wait_for_url(f"{site.base}/backtests/sweeps/new/")
    page.fill("textarea[name=grid]", '{"lookback": 3}')  # not a list: a form error, no sweep
    page.click("#sweep-form button[type=submit]")
    page.locator('.field-error[data-field="grid"]').first.wait_for()

    page.select_option("select[name=kind]", "ema")
    page.fill("textarea[name=params]", json.dumps({"timeframe_s": 10}))
    page.fill("textarea[name=grid]", json.dumps(GRID))
    page.select_option("select[name=metric]", "pnl")
    page.fill("input[name=workers]", "2")
    page.select_option("select[name=instruments]", label=f"replay / {WALK_SYMBOL}")
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
