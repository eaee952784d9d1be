"""A trader's day in the browser: prices move, a replayed breakout lands on the chart,
a signal shows whether it traded (and why not), a strategy is switched with
confirmation, a broker login is completed with a code, and two users never see each
other's orders, positions or prompts."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.e2e.conftest import ARTIFACTS, ROOT, Site, open_dashboard, screenshot
from tests.e2e.site_setup import BREAKOUT_STRATEGY, REPLAY_SYMBOL
from tests.helpers import eventually


def api(page, path: str):  # type: ignore[no-untyped-def]
    response = page.request.get(path)
    assert response.ok, f"{path}: {response.status}"
    return json.loads(response.text())


def test_log_in_and_see_prices_move(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    page = open_dashboard(browser, site, "demo")
    price = page.locator('#prices tr[data-symbol="BTC-USD"] .price')
    page.wait_for_function("el => el.textContent.trim() !== '–'", arg=price.element_handle())
    first = price.text_content()
    page.wait_for_function("([el, first]) => el.textContent !== first", arg=[price.element_handle(), first])
    chart = page.locator('.chart-card[data-symbol="BTC-USD"] .chart')
    page.wait_for_function("el => Number(el.dataset.points) > 3", arg=chart.element_handle())
    assert chart.locator("canvas").count() > 0  # lightweight-charts drew it
    screenshot(page, "dashboard")
    page.context.close()


def test_a_replayed_breakout_shows_as_a_signal_and_a_chart_marker(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    page = open_dashboard(browser, site, "demo")
    chart = page.locator(f'.chart-card[data-symbol="{REPLAY_SYMBOL}"] .chart')
    page.wait_for_function("el => Number(el.dataset.markers) > 0", arg=chart.element_handle())
    row = page.locator("#signals tbody tr", has_text=BREAKOUT_STRATEGY).first
    row.wait_for()
    assert "ENTRY" in row.text_content() or "EXIT" in row.text_content()
    screenshot(page, "signals")
    page.locator(f'.chart-card[data-symbol="{REPLAY_SYMBOL}"]').screenshot(path=str(ARTIFACTS / "signal-chart.png"))
    page.context.close()


def record_outcomes(site: Site, decisions: list[dict]) -> list[dict]:
    """Decide signals in the site's own database, as its trade executor does; return the events it pushes."""
    code = f"import django; django.setup(); from tests.e2e.site_setup import record_outcomes; record_outcomes({json.dumps(decisions)!r})"
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


def outcome_badges(page, signal: dict) -> list[dict]:  # type: ignore[no-untyped-def]
    row = page.locator(
        f'#signals tbody tr[data-signal="{signal["output_id"]}"][data-kind="{signal["kind"]}"][data-strategy="{signal["strategy"]}"]'
    )
    return row.locator(".outcomes .outcome").evaluate_all(
        "badges => badges.map(b => ({state: b.className.replace('outcome ', ''), outcome: b.dataset.outcome, account: b.dataset.account, text: b.textContent, title: b.title}))"
    )


def test_a_traded_and_an_untraded_signal_show_their_outcomes_in_the_table_and_on_the_chart(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    page = open_dashboard(browser, site, "demo")

    def two_stored_breakouts() -> list[dict]:
        rows = [s for s in api(page, "/api/signals/?limit=10")["results"] if s["strategy_name"] == BREAKOUT_STRATEGY]
        return rows[:2] if len(rows) >= 2 else []

    traded, untraded = eventually(two_stored_breakouts, timeout_s=30, interval_s=0.5)
    order_id = f"ts-{site.demo_account}-e2e-traded"
    record_outcomes(
        site,
        [
            {
                "signal_id": traded["id"],
                "account_id": site.demo_account,
                "outcome": "placed",
                "client_order_id": order_id,
            },
            {
                "signal_id": untraded["id"],
                "account_id": site.demo_account,
                "outcome": "halted",
                "reason": "account kill switch engaged: e2e",
            },
        ],
    )
    # The API says so first ...
    by_id = {s["id"]: s for s in api(page, "/api/signals/?limit=50")["results"]}
    demo_outcome = lambda signal: next(o for o in by_id[signal["id"]]["outcomes"] if o["account"] == site.demo_account)  # noqa: E731
    assert (demo_outcome(traded)["outcome"], by_id[traded["id"]]["traded"]) == ("placed", True)
    assert demo_outcome(untraded)["outcome"] == "halted"

    # ... and after a reload the page shows both, traded with its order, untraded with its reason.
    page.reload()
    page.wait_for_selector("#connection[data-state=live]")
    (placed,) = [b for b in outcome_badges(page, traded) if b["outcome"] == "placed"]
    assert placed["state"] == "traded" and order_id in placed["text"] and "Traded" in placed["text"]
    (halted,) = [b for b in outcome_badges(page, untraded) if b["outcome"] == "halted"]
    assert halted["state"] == "not-traded" and "kill switch" in halted["text"].lower()
    assert halted["title"].endswith("account kill switch engaged: e2e")
    # The chart redraws its markers from the page's data: a traded and an untraded one, drawn differently.
    chart = page.locator(f'.chart-card[data-symbol="{REPLAY_SYMBOL}"] .chart')
    page.wait_for_function(
        "el => Number(el.dataset.markersTraded) > 0 && Number(el.dataset.markersNotTraded) > 0",
        arg=chart.element_handle(),
    )
    screenshot(page, "signal-outcomes")
    page.locator("#panel-signals").screenshot(path=str(ARTIFACTS / "signal-outcomes-table.png"))
    page.locator(f'.chart-card[data-symbol="{REPLAY_SYMBOL}"]').screenshot(
        path=str(ARTIFACTS / "signal-outcomes-chart.png")
    )
    page.context.close()
    # Bob trades the same strategy and sees the same signals, never demo's outcomes of them.
    bob = open_dashboard(browser, site, "bob")
    assert all(
        b["account"] != str(site.demo_account) for b in outcome_badges(bob, traded) + outcome_badges(bob, untraded)
    )
    assert order_id not in bob.locator("#panel-signals").text_content()
    assert all(
        o["account"] != site.demo_account for s in api(bob, "/api/signals/?limit=50")["results"] for o in s["outcomes"]
    )
    bob.context.close()


def test_an_outcome_pushed_to_the_socket_changes_the_signal_row_and_its_marker_in_place(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    sockets = []

    def relay(ws) -> None:  # type: ignore[no-untyped-def]
        ws.connect_to_server()  # everything the site sends still reaches the page
        sockets.append(ws)

    page = open_dashboard(browser, site, "demo", socket_route=relay)
    chart = page.locator(f'.chart-card[data-symbol="{REPLAY_SYMBOL}"] .chart')

    def a_live_stored_breakout() -> dict | None:
        # A breakout row pushed live (not in the page's HTML) whose signal is stored, with its marker on the chart.
        live = page.eval_on_selector_all(
            "#signals tbody tr.new",
            "rows => rows.map(r => ({output_id: r.dataset.signal, kind: r.dataset.kind,"
            " states: [...r.querySelectorAll('.outcome')].map(b => b.className.replace('outcome ', ''))}))",
        )
        breakouts = api(page, "/api/signals/?limit=20&symbol=" + REPLAY_SYMBOL)["results"]
        stored = {(s["output_id"], s["kind"]): s for s in breakouts if s["strategy_name"] == BREAKOUT_STRATEGY}
        found = next((row for row in live if (row["output_id"], row["kind"]) in stored), None)
        return found and {**stored[(found["output_id"], found["kind"])], "states": found["states"]}

    signal = eventually(a_live_stored_breakout, timeout_s=30, interval_s=0.5)
    # Decide it the other way from what the row shows now, so the marker must change.
    if "not-traded" in signal["states"]:
        decision = {"outcome": "placed", "client_order_id": f"ts-{site.demo_account}-e2e-live"}
        expect_state, expect_title, counter = "traded", "Traded", "data-markers-traded"
    else:
        decision = {"outcome": "insufficient_capital", "reason": "e2e: needs 101, 0 available"}
        expect_state, expect_title, counter = "not-traded", "e2e: needs 101, 0 available", "data-markers-not-traded"
    before = int(chart.get_attribute(counter) or 0)
    (event,) = record_outcomes(site, [{"signal_id": signal["id"], "account_id": site.demo_account, **decision}])
    assert event["type"] == "signal.outcome" and event["output_id"] == signal["output_id"]
    # This site's channel layer is in-process: relay the push the decision made, as the layer would.
    sockets[-1].send(json.dumps(event))

    page.wait_for_function(
        """([id, kind, outcome, state, title]) => {
            const badge = document.querySelector(`#signals tr[data-signal="${id}"][data-kind="${kind}"] .outcome[data-outcome="${outcome}"]`);
            return badge && badge.classList.contains(state) && badge.title.endsWith(title);
        }""",
        arg=[signal["output_id"], signal["kind"], decision["outcome"], expect_state, expect_title],
    )
    row = page.locator(f'#signals tr[data-signal="{signal["output_id"]}"][data-kind="{signal["kind"]}"]')
    assert row.locator(".outcome").count() == 1  # demo's one account: its badge (or the placeholder) was replaced
    page.wait_for_function(f"el => Number(el.getAttribute('{counter}')) > {before}", arg=chart.element_handle())
    page.context.close()


def test_two_users_see_only_their_own_orders_positions_and_prompts(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    demo = open_dashboard(browser, site, "demo")
    bob = open_dashboard(browser, site, "bob")
    # Both accounts trade the replayed breakouts: orders appear for each, live.
    for page in (demo, bob):
        page.wait_for_selector("#orders tbody tr[data-client-order-id]", timeout=30_000)
    demo_ids = demo.eval_on_selector_all(
        "#orders tbody tr[data-client-order-id]", "rows => rows.map(r => r.dataset.clientOrderId)"
    )
    bob_ids = bob.eval_on_selector_all(
        "#orders tbody tr[data-client-order-id]", "rows => rows.map(r => r.dataset.clientOrderId)"
    )
    assert demo_ids and all(cid.startswith(f"ts-{site.demo_account}-") for cid in demo_ids)
    assert bob_ids and all(cid.startswith(f"ts-{site.bob_account}-") for cid in bob_ids)
    assert {o["account"] for o in api(bob, "/api/orders/")["results"]} == {site.bob_account}
    assert {p["account"] for p in api(bob, "/api/positions/?limit=500")["results"]} <= {site.bob_account}
    assert bob.request.get(f"/api/accounts/{site.demo_account}/").status == 404
    # The login prompt goes to staff only.
    assert demo.locator("#recovery-prompts [data-recovery-token]").count() == 1
    assert bob.locator("#recovery-prompts [data-recovery-token]").count() == 0
    assert api(bob, "/api/prompts/")["results"] == []
    assert bob.locator("#panel-health").count() == 0
    screenshot(bob, "second-user")
    demo.context.close()
    bob.context.close()


def test_switch_a_strategy_off_and_on_with_confirmation(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    page = open_dashboard(browser, site, "demo")
    button = page.locator("#strategies tr", has_text="ema-cross").locator("form.toggle-strategy button")
    assert button.text_content().strip() == "enabled"
    button.click()
    dialog = page.locator("#confirm-dialog")
    assert "Disable strategy ema-cross" in dialog.locator(".question").text_content()
    dialog.locator("button[value=cancel]").click()  # cancelled: nothing changes
    assert next(s for s in api(page, "/api/strategies/")["results"] if s["name"] == "ema-cross")["enabled"] is True

    button.click()
    dialog.locator("input[name=reason]").fill("e2e: pause")
    screenshot(page, "confirm-dialog", full_page=False)
    dialog.locator("#confirm-yes").click()
    page.wait_for_selector('#strategies tr:has-text("ema-cross") form.toggle-strategy button:has-text("disabled")')
    assert next(s for s in api(page, "/api/strategies/")["results"] if s["name"] == "ema-cross")["enabled"] is False
    page.locator("details.audit summary").click()
    assert "e2e: pause" in page.locator("#audit").text_content()

    page.locator('#strategies tr:has-text("ema-cross") form.toggle-strategy button').click()
    dialog.locator("#confirm-yes").click()
    page.wait_for_selector('#strategies tr:has-text("ema-cross") form.toggle-strategy button:has-text("enabled")')
    page.context.close()


def submit_code(card, code: str) -> None:  # type: ignore[no-untyped-def]
    """Type and submit in one browser task: a pushed prompt update re-renders the card,
    and must not land between typing the code and pressing the button."""
    card.locator("form.prompt-code-form").evaluate(
        "(form, code) => { form.code.value = code; form.requestSubmit(); }", code
    )


def test_submit_an_auth_code_in_the_login_prompt(site: Site, browser) -> None:  # type: ignore[no-untyped-def]
    page = open_dashboard(browser, site, "demo")
    card = page.locator("#recovery-prompts [data-recovery-token]")
    card.wait_for()
    assert "Upstox" in card.text_content()
    screenshot(page, "auth-prompt", full_page=False)
    submit_code(card, "not-a-real-code")
    page.wait_for_function(
        "() => (document.querySelector('#recovery-prompts .prompt-error') || {}).textContent?.includes('authorization code')"
    )
    assert card.count() == 1  # a wrong code keeps the prompt open with the broker's reason

    submit_code(card, site.fake_upstox.log_in())
    card.wait_for(state="detached")
    assert api(page, "/api/prompts/")["results"] == []
    assert len(site.fake_upstox.issued) == 1
    page.context.close()
