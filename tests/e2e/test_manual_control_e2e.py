"""Manual control and risk limits in the browser, on the running site's paper exchange:
a manual entry then a close, a flatten of two positions, a stop-loss that fires on
live ticks, and a daily loss limit that engages the account's kill switch."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.conftest import PASSWORD, ROOT, Site, open_dashboard, screenshot
from tests.helpers import eventually

# The first browser test of a session starts the site; fills on the simulated feed come at its pace.
pytestmark = pytest.mark.timeout(480)


def _in_site(site: Site, call: str) -> Any:
    code = f"import django; django.setup(); from tests.e2e.manual_setup import make_trader, books; {call}"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**site.env, "DJANGO_SETTINGS_MODULE": "tradingsite.settings"},
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def make_trader(site: Site, username: str, **limits: str) -> int:
    return int(_in_site(site, f"make_trader({username!r}, {PASSWORD!r}, {json.dumps(limits)!r})")["account"])


def books(site: Site, username: str) -> dict[str, Any]:
    return dict(_in_site(site, f"books({username!r})"))


def confirm(page, reason: str) -> None:  # type: ignore[no-untyped-def]
    dialog = page.locator("#confirm-dialog")
    dialog.wait_for(state="visible")
    dialog.locator("input[name=reason]").fill(reason)
    page.click("#confirm-yes")


def enter(page, symbol: str, side: str = "LONG") -> None:  # type: ignore[no-untyped-def]
    form = page.locator("#manual-entry")
    option = form.locator("select[name=choice] option", has_text=symbol).first
    form.locator("select[name=choice]").select_option(option.get_attribute("value"))
    form.locator("select[name=side]").select_option(side)
    form.locator("button[type=submit]").click()
    confirm(page, f"e2e: enter {symbol}")


def filled_rows(page, expected: int) -> None:  # type: ignore[no-untyped-def]
    """Wait for `expected` open positions with a quantity in the manual panel (it refreshes on trade pushes)."""
    page.wait_for_function(
        """n => [...document.querySelectorAll('#manual-positions tbody tr[data-position]')]
             .filter(r => Number(r.querySelector('td.num').textContent) > 0).length === n""",
        arg=expected,
        timeout=90_000,
    )


def open_positions(site: Site, username: str) -> list[dict[str, Any]]:
    return [p for p in books(site, username)["positions"] if p["state"] == "OPEN"]


def test_a_manual_entry_then_close_ends_flat_at_the_paper_broker_and_in_the_ledger(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    make_trader(site, "dora")
    page = open_dashboard(browser, site, "dora")
    enter(page, "BTC-USD")
    filled_rows(page, 1)
    screenshot(page, "manual-entry")
    page.locator("#manual-positions form.position-close button").first.click()
    confirm(page, "e2e: close by hand")
    page.wait_for_selector("#manual-positions tr.empty", timeout=90_000)

    def flat() -> dict[str, Any] | None:
        state = books(site, "dora")
        done = state["broker"] == [] and all(p["state"] == "CLOSED" for p in state["positions"])
        return state if done else None

    state = eventually(flat, timeout_s=90, interval_s=0.5)
    assert state["ledger_ok"] and len(state["positions"]) == 1
    assert any(o[0].startswith("manual-close-") and o[1] == "placed" for o in state["outcomes"])
    page.context.close()


def test_flatten_closes_every_position_of_the_account(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    make_trader(site, "frank")
    page = open_dashboard(browser, site, "frank")
    enter(page, "BTC-USD")
    enter(page, "ETH-USD", side="SHORT")
    filled_rows(page, 2)
    page.locator("#manual-accounts form.account-flatten button").click()
    confirm(page, "e2e: flatten")
    page.wait_for_selector("#manual-positions tr.empty", timeout=90_000)

    def flat() -> dict[str, Any] | None:
        state = books(site, "frank")
        done = state["broker"] == [] and all(p["state"] == "CLOSED" for p in state["positions"])
        return state if done else None

    state = eventually(flat, timeout_s=90, interval_s=0.5)
    assert state["ledger_ok"] and len(state["positions"]) == 2
    assert sum(o[0].startswith("manual-flatten-") and o[1] == "placed" for o in state["outcomes"]) == 2
    screenshot(page, "manual-flatten")
    page.context.close()


def test_a_stop_loss_fires_on_live_ticks_and_closes_the_position(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    make_trader(site, "dave", stop_loss_pct="0.02")
    page = open_dashboard(browser, site, "dave")
    enter(page, "BTC-USD")

    def stopped() -> dict[str, Any] | None:
        state = books(site, "dave")
        done = "risk.stop_loss" in state["risk_events"] and state["broker"] == [] and state["positions"]
        return state if done and all(p["state"] == "CLOSED" for p in state["positions"]) else None

    state = eventually(stopped, timeout_s=90, interval_s=1)
    assert state["ledger_ok"]
    assert any(o[0].startswith("risk-stop-loss-") and o[1] == "placed" for o in state["outcomes"])
    page.wait_for_selector("#manual-positions tr.empty", timeout=90_000)
    page.context.close()


def test_the_daily_loss_limit_engages_the_account_kill_switch(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    account = make_trader(site, "erin", stop_loss_pct="0.02", daily_loss_limit="0.000001")
    page = open_dashboard(browser, site, "erin")
    enter(page, "BTC-USD")  # the stop-loss closes it at a loss, which reaches the limit
    halted = page.locator(f'#accounts tr[data-account="{account}"] .badge-bad')
    halted.wait_for(timeout=90_000)
    assert "daily loss limit" in (halted.get_attribute("title") or "")
    screenshot(page, "daily-loss-kill-switch")
    # A new entry is refused with the switch's reason, recorded as the signal's outcome.
    enter(page, "ETH-USD")

    def refused() -> dict[str, Any] | None:
        state = books(site, "erin")
        return state if any(o[1] == "halted" and "daily loss limit" in o[2] for o in state["outcomes"]) else None

    eventually(refused, timeout_s=90, interval_s=0.5)
    page.context.close()
