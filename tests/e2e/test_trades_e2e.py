"""A trader reviews their closed trades and performance in the browser: the history with its
filters and CSV, and the performance figures, against the hand-computed history of
tests.orders.trade_fixture (booked for carol through the real lifecycle by site_setup)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Site, open_dashboard, screenshot


def _pnls(page) -> list[str]:  # type: ignore[no-untyped-def]
    return [cell.strip() for cell in page.locator("#trades tbody tr td.pnl").all_text_contents()]


def test_the_trades_view_lists_and_filters_the_closed_trades(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    page = open_dashboard(browser, site, "carol")
    page.click("header nav >> text=Trades")
    page.wait_for_url(f"{site.base}/trades/")
    assert _pnls(page) == ["19", "-8.8", "4.5", "-12", "9"]
    first = page.locator("#trades tbody tr").last  # trade 1, the oldest exit
    text = first.text_content() or ""
    for expected in (
        "carol-alpha",
        "BTCUSDT",
        "LONG",
        "2026-11-02 10:00:00 UTC",
        "2026-11-02 11:00:00 UTC",
        "1h 00m 00s",
        "EXIT_LONG",
    ):
        assert expected in text, expected
    assert first.locator("td.fees").text_content() == "1"
    assert first.locator("td.pnl-percent").text_content() == "9.00"
    screenshot(page, "trades")

    page.select_option("#trade-filters select[name=strategy]", label="carol-alpha")
    page.fill("#trade-filters input[name=symbol]", "ETHUSDT")
    page.click("#trade-filters button[type=submit]")
    page.wait_for_url("**/trades/?*")
    assert _pnls(page) == ["-8.8", "4.5"]
    page.select_option("#trade-filters select[name=result]", "win")
    page.click("#trade-filters button[type=submit]")
    page.wait_for_function("() => document.querySelectorAll('#trades tbody tr').length === 1")
    assert _pnls(page) == ["4.5"]

    with page.expect_download() as download:
        page.click("#trades-csv")
    lines = Path(download.value.path()).read_text(encoding="utf-8").strip().splitlines()
    assert len(lines) == 2 and lines[1].endswith(",4.5,9.00,EXIT_SHORT")

    response = page.goto(f"{site.base}/trades/?since=2026-12-01&until=2026-11-01")
    assert response is not None and response.status == 400
    assert "must be on or after since" in page.locator("#filter-errors").text_content()
    page.context.close()


def test_the_performance_page_shows_the_hand_computed_figures(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    page = open_dashboard(browser, site, "carol")
    page.click("header nav >> text=Performance")
    page.wait_for_url(f"{site.base}/performance/")
    figures = {
        "perf-net-pnl": "11.7",
        "perf-trades": "5",
        "perf-win-rate": "60.00",
        "perf-profit-factor": "1.5625",
        "perf-average-win": "10.833333333333",
        "perf-average-loss": "-10.4",
        "perf-max-drawdown": "16.3",
        "perf-max-drawdown-percent": "0.16",
        "perf-fees": "5.3",
    }
    for element, value in figures.items():
        assert page.locator(f"#{element}").text_content() == value, element
    days = page.locator("#perf-daily tbody tr")
    assert [days.nth(n).get_attribute("data-start") for n in range(days.count())] == [
        "2026-11-02",
        "2026-11-03",
        "2026-11-10",
        "2026-12-01",
    ]
    assert page.locator("#perf-daily tbody tr td.pnl").all_text_contents() == ["9", "-7.5", "-8.8", "19"]
    assert page.locator("#perf-weekly tbody tr td.pnl").all_text_contents() == ["1.5", "-8.8", "19"]
    assert page.locator("#perf-monthly tbody tr td.pnl").all_text_contents() == ["-7.3", "19"]
    assert page.locator("#perf-by-strategy tbody tr td.pnl").all_text_contents() == ["19", "-7.3"]
    assert page.locator("#perf-by-instrument tbody tr td.pnl").all_text_contents() == ["16", "-4.3"]
    assert page.locator("#equity-curve").get_attribute("data-points") == "4"
    assert len((page.locator("#equity-curve polyline").get_attribute("points") or "").split()) == 5
    screenshot(page, "performance")

    page.select_option("#trade-filters select[name=strategy]", label="carol-alpha")
    page.click("#trade-filters button[type=submit]")
    page.wait_for_url("**/performance/?*")
    assert page.locator("#perf-net-pnl").text_content() == "-7.3"
    assert page.locator("#perf-trades").text_content() == "4"
    page.context.close()


def test_another_user_sees_none_of_carols_trades(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    page = open_dashboard(browser, site, "bob")
    page.goto(f"{site.base}/trades/?symbol=ETHUSDT")
    assert "No closed trades" in (page.locator("#trades").text_content() or "")
    page.goto(f"{site.base}/performance/")
    assert page.locator("#perf-trades").text_content() != "5"
    assert "carol" not in page.content()
    page.context.close()
