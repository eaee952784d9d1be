"""The Content-Security-Policy holds in a real browser: every page of the site renders
without one violation (no inline script or style, the chart library from the site), and
the policy is enforced, not just sent: an injected inline script is blocked and reported.

The real site (`manage.py runsite`, the e2e fixture) driven by Debian's Chromium.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import Site, open_dashboard

pytestmark = pytest.mark.needs_chromium

# Runs before any page script (Playwright injects it outside the page's CSP): every
# violation the browser reports lands in window.__cspViolations.
COLLECT_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', (event) => {
  window.__cspViolations.push({directive: event.violatedDirective, blocked: event.blockedURI, sample: event.sample});
});
"""


class Watched:
    """A logged-in page whose CSP violations and console CSP errors are collected."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console: list[str] = []
        page.on("console", lambda message: self.console.append(message.text))

    def visit(self, path: str) -> list[Any]:
        response = self.page.goto(path)
        assert response is not None and response.status < 400, f"{path}: {response and response.status}"
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy, f"{path}: policy {policy!r}"
        self.page.wait_for_load_state("networkidle")
        return self.violations()

    def assert_clean(self, path: str) -> None:
        found = self.visit(path)
        assert found == [], f"{path}: " + json.dumps(found, indent=1)

    def violations(self) -> list[Any]:
        found = list(self.page.evaluate("() => window.__cspViolations || []"))
        found += [text for text in self.console if "Content Security Policy" in text]
        return found


@pytest.fixture
def demo(site: Site, browser: Any) -> Iterator[Watched]:
    page = open_dashboard(browser, site, "demo")
    page.context.add_init_script(COLLECT_VIOLATIONS)
    watched = Watched(page)
    yield watched
    page.context.close()


def test_the_policy_is_enforced_and_an_injected_inline_script_is_reported(demo: Watched) -> None:
    demo.assert_clean("/")
    demo.page.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = 'window.__ran = 1'; document.body.append(s); }"
    )
    demo.page.wait_for_function("() => window.__cspViolations.length > 0")
    assert demo.page.evaluate("() => window.__ran") is None
    assert demo.violations()[0]["directive"].startswith("script-src")


def test_every_page_renders_without_a_policy_violation(site: Site, demo: Watched) -> None:
    page = demo.page
    # The dashboard: its scripts, the chart library, the live socket and the panels it refreshes.
    demo.assert_clean("/")
    page.wait_for_selector("#connection[data-state=live]")
    page.wait_for_selector("#charts canvas")
    assert demo.violations() == []
    pages = ["/dashboard/panels/health/", "/internal/health", "/api/orders/"]
    prompts = json.loads(page.request.get("/api/prompts/").text())["results"]
    assert prompts, "the e2e site opens one broker login prompt"
    pages.append(f"/recovery/prompts/{prompts[0]['recovery_token']}/")
    strategy = json.loads(page.request.get("/api/strategies/").text())["results"][0]["id"]
    pages += ["/admin/", "/admin/processor/strategy/", f"/admin/processor/strategy/{strategy}/change/"]
    pages += ["/admin/auth/user/add/", "/admin/orders/account/"]
    for path in pages:
        demo.assert_clean(path)


def test_the_login_pages_render_without_a_policy_violation(site: Site, browser: Any) -> None:
    context = browser.new_context(base_url=site.base)
    context.add_init_script(COLLECT_VIOLATIONS)
    watched = Watched(context.new_page())
    try:
        for path in ["/login/", "/admin/login/?next=/admin/"]:
            watched.assert_clean(path)
    finally:
        context.close()
