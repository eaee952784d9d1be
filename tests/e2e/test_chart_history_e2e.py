"""Candles from recorded history: a known minute of ticks is drawn with its OHLC when the page
opens, is still there after a reload, changes with the timeframe, and the live pushes continue
the last candle."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.e2e.conftest import ARTIFACTS, ROOT, Site, open_dashboard, screenshot
from tests.e2e.site_setup import REPLAY_SYMBOL

FEED = "replay"
CARD = f'.chart-card[data-symbol="{REPLAY_SYMBOL}"]'


def record_ticks(site: Site, ticks: list[list[object]]) -> None:
    code = (
        "import django; django.setup(); from tests.e2e.chart_ticks import record_ticks; "
        f"record_ticks({FEED!r}, {REPLAY_SYMBOL!r}, {json.dumps(ticks)!r})"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**site.env, "DJANGO_SETTINGS_MODULE": "tradingsite.settings"},
        check=True,
        timeout=120,
        capture_output=True,
    )


def chart_state(page):  # type: ignore[no-untyped-def]
    return page.evaluate("([feed, symbol]) => window.DashboardCharts.state(feed, symbol)", [FEED, REPLAY_SYMBOL])


def wait_history(page, timeframe: str, loads: int = 1) -> None:  # type: ignore[no-untyped-def]
    chart = page.locator(f"{CARD} .chart")
    page.wait_for_function(
        "([el, tf, n]) => el.dataset.timeframe === tf && el.dataset.history === 'loaded' && Number(el.dataset.historyLoads) >= n",
        arg=[chart.element_handle(), timeframe, loads],
    )


def bar_at(page, t: int) -> dict | None:  # type: ignore[no-untyped-def]
    return next((bar for bar in chart_state(page)["bars"] if bar["time"] == t), None)


def test_candles_come_from_recorded_history_and_follow_the_timeframe(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    # A minute five minutes back, before the replay feed's own ticks: open, high, low, close by hand.
    minute = (int(time.time()) // 60 - 5) * 60
    ms = minute * 1000
    record_ticks(
        site,
        [
            [ms + 1_000, "100.10", "1", "e2e-1"],
            [ms + 10_000, "103.30", "2", "e2e-2"],
            [ms + 20_000, "97.70", "3", "e2e-3"],
            [ms + 30_000, "99.90", "4", "e2e-4"],
        ],
    )
    expected = {
        "time": minute,
        "open": "100.1",
        "high": "103.3",
        "low": "97.7",
        "close": "99.9",
        "volume": "10",
        "trades": 4,
    }

    page = open_dashboard(browser, site, "demo")
    wait_history(page, "1m")
    assert bar_at(page, minute) == expected
    # The legend under the pointer shows that candle, exactly as the server sent it.
    page.locator(f"{CARD} .chart").scroll_into_view_if_needed()
    box = page.locator(f"{CARD} .chart").bounding_box()
    x = page.evaluate("([f, s, t]) => window.DashboardCharts.x(f, s, t)", [FEED, REPLAY_SYMBOL, minute])
    assert x is not None
    page.mouse.move(box["x"] + x, box["y"] + box["height"] / 2)
    legend = page.locator(f"{CARD} .chart-legend")
    page.wait_for_function("([el, t]) => el.dataset.time === String(t)", arg=[legend.element_handle(), minute])
    assert "O 100.1 H 103.3 L 97.7 C 99.9 V 10" in " ".join(legend.inner_text().split())
    # Only the candles put a label on the right-hand price scale: nothing stacks there.
    assert chart_state(page)["axisLabels"] == 1
    page.locator(CARD).screenshot(path=str(ARTIFACTS / "candles.png"))

    page.reload()
    page.wait_for_selector("#connection[data-state=live]")
    wait_history(page, "1m")
    assert bar_at(page, minute) == expected

    # Five-second candles split the same minute: one bar per recorded tick.
    page.click(f'{CARD} button[data-timeframe="5s"]')
    wait_history(page, "5s", loads=2)
    assert page.locator(f'{CARD} button[data-timeframe="5s"]').get_attribute("aria-pressed") == "true"
    assert [bar_at(page, minute + offset) for offset in (0, 10, 20, 30)] == [
        {
            "time": minute + offset,
            "open": price,
            "high": price,
            "low": price,
            "close": price,
            "volume": volume,
            "trades": 1,
        }
        for offset, price, volume in ((0, "100.1", "1"), (10, "103.3", "2"), (20, "97.7", "3"), (30, "99.9", "4"))
    ]
    assert bar_at(page, minute + 5) is None  # no trade in that bucket: no candle

    # Live pushes continue the chart: a new candle appears after the last historical one.
    last = chart_state(page)["bars"][-1]["time"]
    page.wait_for_function(
        "([f, s, t]) => window.DashboardCharts.state(f, s).bars.some(b => b.time > t)",
        arg=[FEED, REPLAY_SYMBOL, last],
        timeout=15_000,
    )
    price = page.locator(f'#prices tr[data-symbol="{REPLAY_SYMBOL}"] .price').text_content()
    newest = chart_state(page)["bars"][-1]
    assert float(newest["low"]) <= float(price) <= float(newest["high"]) or newest["close"] == price

    # The choice survives a reload.
    page.reload()
    page.wait_for_selector("#connection[data-state=live]")
    wait_history(page, "5s")
    assert bar_at(page, minute + 10)["high"] == "103.3"
    screenshot(page, "candles-dashboard")
    page.context.close()
