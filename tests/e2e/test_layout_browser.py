"""The layout in a real browser: kill switches in view on a phone and at 1400 px, AA contrast of
every button computed in the page, a favicon without a 404, times in the user's zone, the API
viewer behind the login, and the alerts and settings pages without a policy violation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import PASSWORD, Site, screenshot
from tests.e2e.test_csp_browser import COLLECT_VIOLATIONS

pytestmark = pytest.mark.needs_chromium

PHONE = {"width": 375, "height": 740}
DESKTOP_1400 = {"width": 1400, "height": 900}

# WCAG 2 contrast of each visible button's text on its (first opaque) background.
BUTTON_CONTRAST = """
() => {
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
  const channel = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const luminance = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const background = (el) => {
    for (let node = el; node; node = node.parentElement) {
      const [r, g, b, a] = rgb(getComputedStyle(node).backgroundColor);
      if (a === undefined || a > 0.9) return [r, g, b];
    }
    return [255, 255, 255];
  };
  return [...document.querySelectorAll("button")].filter((b) => b.offsetParent !== null).map((b) => {
    const fg = luminance(rgb(getComputedStyle(b).color)), bg = luminance(background(b));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    return { text: b.textContent.trim(), ratio: Math.round(ratio * 100) / 100 };
  });
}
"""


def log_in(browser: Any, site: Site, username: str, viewport: dict[str, int]) -> Any:
    context = browser.new_context(base_url=site.base, viewport=viewport)
    context.add_init_script(COLLECT_VIOLATIONS)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{site.base}/")
    page.wait_for_selector("#connection[data-state=live]")
    return page


@pytest.fixture
def pages() -> Iterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for page in opened:
        page.context.close()


def in_viewport(page: Any, selector: str) -> bool:
    box = page.locator(selector).first.bounding_box()
    size = page.viewport_size
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= size["width"] + 0.5
        and box["y"] + box["height"] <= size["height"] + 0.5
    )


def test_on_a_phone_the_kill_switches_stay_in_view_and_the_page_never_scrolls_sideways(
    site: Site, browser: Any, pages: list[Any]
) -> None:
    page = log_in(browser, site, "demo", PHONE)
    pages.append(page)
    account_switch = f"#panel-kill_bar form.kill-bar-account[data-account='{site.demo_account}'] button"
    for selector in ("#panel-kill_bar form.kill-bar-global button", account_switch):
        assert in_viewport(page, selector), selector
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    # The key columns of the prices table and the account's own kill switch fit the screen.
    for selector in ("#prices th:nth-child(1)", "#prices th:nth-child(3)", "#prices th:nth-child(4)"):
        assert page.locator(selector).first.is_visible()
        box = page.locator(selector).first.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"], selector
    assert not page.locator("#prices th:nth-child(2)").first.is_visible()  # the feed column gives way
    page.locator("#panel-accounts").scroll_into_view_if_needed()
    row_switch = page.locator(f"#accounts tr[data-account='{site.demo_account}'] td:last-child button")
    box = row_switch.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    # Scrolled to the bottom, the bar is still pinned at the top of the screen.
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_function("() => window.scrollY > 200")
    assert in_viewport(page, account_switch)
    screenshot(page, "layout-phone", full_page=False)
    assert page.evaluate("() => window.__cspViolations") == []


def test_at_1400_px_the_account_kill_switch_sits_inside_its_card(site: Site, browser: Any, pages: list[Any]) -> None:
    page = log_in(browser, site, "demo", DESKTOP_1400)
    pages.append(page)
    card = page.locator("#panel-accounts").bounding_box()
    button = page.locator(f"#accounts tr[data-account='{site.demo_account}'] form.kill-account button").bounding_box()
    assert card is not None and button is not None
    assert card["x"] <= button["x"] and button["x"] + button["width"] <= card["x"] + card["width"]
    assert page.locator(f"#accounts tr[data-account='{site.demo_account}'] form.kill-account button").is_visible()
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_function("() => window.scrollY > 100")
    assert in_viewport(page, "#panel-kill_bar form.kill-bar-global button")
    screenshot(page, "layout-1400", full_page=False)


def test_every_button_reaches_aa_contrast(site: Site, browser: Any, pages: list[Any]) -> None:
    page = log_in(browser, site, "demo", DESKTOP_1400)
    pages.append(page)
    measured = page.evaluate(BUTTON_CONTRAST)
    for path in ("/alerts/", "/settings/time-zone/"):
        page.goto(path)
        measured += page.evaluate(BUTTON_CONTRAST)
    assert len(measured) >= 5
    low = [m for m in measured if m["ratio"] < 4.5]
    assert not low, f"buttons under 4.5:1: {low}"


def test_pages_load_their_favicon_without_a_404(site: Site, browser: Any, pages: list[Any]) -> None:
    context = browser.new_context(base_url=site.base)
    page = context.new_page()
    pages.append(page)
    missing: list[str] = []
    page.on("response", lambda response: missing.append(response.url) if response.status == 404 else None)
    page.goto("/login/")
    page.wait_for_load_state("networkidle")
    icon = page.evaluate("() => document.querySelector('link[rel=icon]').href")
    assert page.request.get(icon).status == 200
    assert page.request.get("/favicon.ico").status == 200  # followed to the same icon
    assert missing == []


def test_the_chosen_time_zone_is_on_every_time_the_server_and_the_browser_render(
    site: Site, browser: Any, pages: list[Any]
) -> None:
    page = log_in(browser, site, "bob", DESKTOP_1400)
    pages.append(page)
    assert page.locator("nav a.tz").inner_text() == "UTC"
    page.wait_for_function("() => [...document.querySelectorAll('#prices td.time')].some((c) => c.textContent !== '–')")
    live = [t for t in page.locator("#prices td.time").all_inner_texts() if t != "–"]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} UTC", t) for t in live), live
    try:
        page.goto("/settings/time-zone/")
        page.select_option("select[name=time_zone]", "Asia/Kolkata")
        page.click("form.settings-form button[type=submit]")
        page.wait_for_selector("p.flash.success")
        assert page.locator("#now-rendered").inner_text().endswith(" IST")
        page.goto("/")
        page.wait_for_selector("#connection[data-state=live]")
        assert page.locator("nav a.tz").inner_text() == "Asia/Kolkata"
        page.wait_for_function(
            "() => [...document.querySelectorAll('#prices td.time')].some((c) => /(GMT\\+5:30|IST)$/.test(c.textContent))"
        )
        # Rendered by the server (Python's name, IST) or added live by the browser (Intl's, GMT+5:30).
        shown = page.locator("#signals td.time, #orders td.time").all_inner_texts()
        assert all(t.endswith((" IST", " GMT+5:30")) for t in shown), shown
    finally:
        page.goto("/settings/time-zone/")
        page.select_option("select[name=time_zone]", "UTC")
        page.click("form.settings-form button[type=submit]")
        page.wait_for_selector("p.flash.success")


def test_the_api_viewer_needs_a_login_and_renders_the_schema(site: Site, browser: Any, pages: list[Any]) -> None:
    context = browser.new_context(base_url=site.base)
    anonymous = context.new_page()
    pages.append(anonymous)
    anonymous.goto("/api/docs/")
    assert anonymous.url.startswith(f"{site.base}/login/")
    assert anonymous.request.get("/api/schema/").status == 401

    page = log_in(browser, site, "bob", DESKTOP_1400)
    pages.append(page)
    page.goto("/api/docs/")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "tradingsite API" in page.locator(".swagger-ui .info .title").inner_text()
    page.wait_for_selector(".opblock-summary-path >> text=/api/accounts/")
    schema = page.goto("/api/schema/")
    assert schema is not None and schema.headers["content-type"].startswith("application/json")
    assert '"openapi"' in page.content()  # shown in the tab, not downloaded
    assert page.evaluate("() => window.__cspViolations") == []


def test_the_alerts_page_validates_and_never_shows_a_url_back(site: Site, browser: Any, pages: list[Any]) -> None:
    page = log_in(browser, site, "bob", DESKTOP_1400)
    pages.append(page)
    page.goto("/alerts/")
    page.fill("#channel-form input[name=name]", "ops hook")
    page.fill("#channel-form input[name=url]", "http://not-an-apprise-url")
    page.click("#channel-form button[type=submit]")
    page.wait_for_selector("p.field-error")
    assert "the scheme must be one of" in page.locator("p.field-error").inner_text()
    page.fill("#channel-form input[name=url]", "json://127.0.0.1:9/hook/bobs-secret-path")
    page.click("#channel-form button[type=submit]")
    page.wait_for_selector("#channels tr[data-channel]")
    assert "bobs-secret-path" not in page.content()
    assert page.locator("#channels code").first.inner_text() == "json://127.0.0.1:9/…"
    page.locator("#channels form[action$='/test/'] button").first.click()
    page.wait_for_selector("#alerts tr[data-alert]")
    page.locator("#channels form[action$='/delete/'] button").first.click()
    page.wait_for_selector("#channels tr.empty")
    assert page.evaluate("() => window.__cspViolations") == []
