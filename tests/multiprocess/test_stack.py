"""The Procfile's processes for real on PostgreSQL + Redis: two web, runfeed, worker, beat.

One stack for the module (tests.multiprocess.stack): the happy path first (ticks,
signals, orders, jobs, pushes to logged-in websocket clients on both web processes),
then a web restart (1001 close, the other web unaffected, the dashboard re-syncs in a
real browser), then what an operator does by mistake or by accident. The scenarios that
need the feed lease, per-process health and the beat lease describe their target
behaviour and are expected to fail until those land.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from tests.conftest import chromium_path
from tests.multiprocess.stack import DashboardClient, Stack, running_stack

pytestmark = [pytest.mark.needs_postgres, pytest.mark.needs_redis]

WEB_A, WEB_B = 8711, 8712
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "multiprocess"
JOB = "clear-expired-sessions"  # every second in the stack (FAST_SETTINGS)
JOB_TASK = "tradingsite.tasks.clear_expired_sessions"


def stack_database_url() -> str:
    """The stack's own database: the test run's DATABASE_URL with `_stack` appended to its name."""
    parts = urlsplit(os.environ["DATABASE_URL"])
    return parts._replace(path=parts.path.rstrip("/") + "_stack").geturl()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    var_dir = tmp_path_factory.mktemp("stack")
    # The browser test reaches the web ports directly (it plays the TLS proxy), so its pages
    # have the plain-HTTP origin of the web port; a real deployment trusts only its public origin.
    browser_origins = ",".join(f"http://127.0.0.1:{port}" for port in (WEB_A, WEB_B))
    with running_stack(
        stack_database_url(),
        settings.REDIS_URL,
        var_dir,
        WEB_A,
        extra_env={"CSRF_TRUSTED_ORIGINS": browser_origins},
    ) as running:
        try:
            webs = {port: running.start("web", name=f"web-{port}", port=port) for port in (WEB_A, WEB_B)}
            running.start("feed")
            running.start("worker")
            running.start("beat")
            for port, process in webs.items():
                running.wait_ready(port, process)
            yield running
        finally:
            running.stop_all()
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            for log in var_dir.glob("*.log"):
                shutil.copy(log, ARTIFACTS / log.name)


def named(stack: Stack, name: str) -> Any:
    """The most recently started process called `name`."""
    return [p for p in stack.processes if p.name == name][-1]


def wait_for(check: Callable[[], Any], *, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s}s: {what}")


async def until(check: Callable[[], Any], *, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout_s}s: {what}")


def tick_count(stack: Stack) -> int:
    return int(stack.scalar("SELECT count(*) FROM feeds_tick"))


def duplicate_trade_ids(stack: Stack) -> list[tuple[Any, ...]]:
    return stack.sql(
        "SELECT instrument_id, trade_id, count(*) FROM feeds_tick WHERE trade_id <> '' "
        "GROUP BY instrument_id, trade_id HAVING count(*) > 1 LIMIT 5"
    )


def trade_id_gaps(stack: Stack) -> list[tuple[Any, ...]]:
    """Instruments whose recorded trade ids are not one contiguous run (the sim numbers trades 1, 2, 3, ...)."""
    return stack.sql(
        "SELECT instrument_id, min(trade_id::bigint), max(trade_id::bigint), count(*) FROM feeds_tick "
        "WHERE trade_id <> '' GROUP BY instrument_id "
        "HAVING max(trade_id::bigint) - min(trade_id::bigint) + 1 <> count(*)"
    )


def signal_sources(stack: Stack, since: Any) -> list[tuple[Any, ...]]:
    """(strategy, symbol) pairs whose signals since `since` came from more than one strategy execution."""
    return stack.sql(
        "SELECT strategy_id, symbol, count(DISTINCT split_part(output_id, ':', 1)) FROM processor_strategysignal "
        "WHERE emitted_at > %s GROUP BY strategy_id, symbol HAVING count(DISTINCT split_part(output_id, ':', 1)) > 1",
        since,
    )


def pushed_tapes_interleaved(client: DashboardClient) -> list[str]:
    """Symbols whose pushed trade count went backwards: two processes' tapes in one series."""
    last: dict[str, int] = {}
    flipped: list[str] = []
    for event in client.events:
        for price in event.get("prices", ()) if event.get("type") == "prices" else ():
            key = f"{price['feed']}|{price['symbol']}"
            count = int(price["ticks"])
            if count < last.get(key, 0) and key not in flipped:
                flipped.append(key)
            last[key] = count
    return flipped


def job_runs(log_text: str) -> int:
    return sum(1 for line in log_text.splitlines() if JOB_TASK in line and "succeeded" in line)


def feed_status(stack: Stack, port: int) -> str | None:
    feeds: dict[str, dict[str, str]] = stack.internal_health(port)["feeds"]
    return feeds.get("feed:sim", {}).get("status")


def scheme_redirect(port: int, *, proxied: bool) -> tuple[int, str]:
    """DEBUG=0 redirects plain HTTP to HTTPS; behind the proxy (X-Forwarded-Proto: https) it serves."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"X-Forwarded-Proto": "https"} if proxied else {}
        connection.request("GET", "/login/", headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Location", "")
    finally:
        connection.close()


# ---- the happy path ------------------------------------------------------------------


async def test_ticks_signals_orders_jobs_and_pushes_reach_both_web_processes(stack: Stack) -> None:
    clients = [DashboardClient(stack, WEB_A), DashboardClient(stack, WEB_B)]
    for client in clients:
        client.start()
    try:
        await until(
            lambda: all(c.prices() > 0 and c.count("strategy.signal") > 0 for c in clients),
            timeout_s=60,
            what="prices and signals pushed to the clients of both web processes",
        )
        first = tick_count(stack)
        await until(lambda: tick_count(stack) > first, timeout_s=10, what="ticks recorded")
        await until(
            lambda: stack.scalar("SELECT count(*) FROM processor_strategysignal") > 0, timeout_s=10, what="signals"
        )
        await until(lambda: stack.scalar("SELECT count(*) FROM orders_order") > 0, timeout_s=60, what="orders")
        await until(
            lambda: (
                stack.scalar("SELECT status FROM tradingsite_componenthealth WHERE component = %s", f"job:{JOB}")
                == "HEALTHY"
            ),
            timeout_s=20,
            what="a periodic job run by the worker on beat's schedule",
        )
        assert job_runs(named(stack, "worker").output()) > 0
        for port in (WEB_A, WEB_B):
            assert stack.get(port, "/readyz")[0] == 200
            assert feed_status(stack, port) == "HEALTHY"
            assert scheme_redirect(port, proxied=False) == (301, f"https://127.0.0.1:{port}/login/")
            assert scheme_redirect(port, proxied=True) == (200, "")
    finally:
        for client in clients:
            await client.stop()
    assert all(c.close_code is None for c in clients)


# ---- a web restart ---------------------------------------------------------------------


def restart_web(stack: Stack, port: int) -> None:
    process = stack.start("web", name=f"web-{port}", port=port)
    stack.wait_ready(port, process)


async def test_a_stopping_web_process_closes_websockets_going_away_and_the_other_keeps_pushing(stack: Stack) -> None:
    on_a, on_b = DashboardClient(stack, WEB_A), DashboardClient(stack, WEB_B)
    for client in (on_a, on_b):
        client.start()
    try:
        await until(lambda: on_a.prices() > 0 and on_b.prices() > 0, timeout_s=30, what="prices on both")
        code = await asyncio.to_thread(stack.stop, named(stack, f"web-{WEB_A}"))
        assert code == 0
        await until(lambda: on_a.close_code is not None, timeout_s=10, what="web A's socket closed")
        assert on_a.close_code == 1001  # going away, not 1006
        seen = on_b.prices()
        await until(lambda: on_b.prices() > seen, timeout_s=10, what="web B still pushing")
        assert on_b.close_code is None
    finally:
        for client in (on_a, on_b):
            await client.stop()
        await asyncio.to_thread(restart_web, stack, WEB_A)


@pytest.mark.needs_chromium
def test_the_dashboard_resyncs_every_panel_after_its_web_process_restarts(stack: Stack) -> None:
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{WEB_A}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox", "--disable-gpu"])
        try:
            # The test is the TLS proxy: every request says it came in over HTTPS.
            context = browser.new_context(base_url=base, extra_http_headers={"X-Forwarded-Proto": "https"})
            context.add_cookies([{"name": "sessionid", "value": stack.session_key, "url": base}])
            page = context.new_page()
            page.set_default_timeout(30_000)
            page.goto(f"{base}/")
            page.wait_for_selector("#connection[data-state=live]")
            page.wait_for_selector("#signals tbody tr[data-signal]")

            stack.stop(named(stack, f"web-{WEB_A}"))
            down_since = stack.scalar("SELECT now()")
            page.wait_for_selector("#connection[data-state=wait]")
            # Signals (and their outcomes, orders, positions) arrive while the page has no socket.
            wait_for(
                lambda: stack.sql("SELECT 1 FROM processor_strategysignal WHERE emitted_at > %s", down_since),
                timeout_s=30,
                what="a signal while web A is down",
            )
            restart_web(stack, WEB_A)
            up_at = stack.scalar("SELECT now()")
            page.wait_for_selector("#connection[data-state=live]")
            page.wait_for_function("() => Number(document.body.dataset.resyncs || 0) >= 1")
            assert page.evaluate("() => document.body.dataset.resyncFailed") == "0"
            # Signals of the gap: nothing pushed them, only the re-sync can show them.
            gap = {
                f"{row[0]}|{row[1]}|{row[2]}"
                for row in stack.sql(
                    "SELECT output_id, kind, strategy_id FROM processor_strategysignal "
                    "WHERE emitted_at > %s AND emitted_at < %s",
                    down_since,
                    up_at,
                )
            }
            shown = set(
                page.eval_on_selector_all(
                    "#signals tbody tr[data-signal]",
                    "rows => rows.map(r => `${r.dataset.signal}|${r.dataset.kind}|${r.dataset.strategy}`)",
                )
            )
            assert gap & shown, f"none of the {len(gap)} signals of the gap is on the page"
            # Every server-rendered panel was re-rendered, not only the signals.
            refreshed = page.eval_on_selector_all(
                "[data-panel]:not([data-panel=prices])", "els => els.map(e => [e.dataset.panel, e.dataset.refreshed])"
            )
            assert refreshed and all(count and int(count) >= 1 for _, count in refreshed), refreshed
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "resynced.png"), full_page=True)
            context.close()
        finally:
            browser.close()


# ---- what an operator does by mistake or by accident ---------------------------------------


async def test_a_second_runfeed_for_the_same_feed_waits_as_standby(stack: Stack) -> None:
    client = DashboardClient(stack, WEB_B)
    client.start()
    since = stack.scalar("SELECT now()")
    standby = stack.start("feed", name="feed-standby")
    try:
        before = tick_count(stack)
        deadline = time.monotonic() + 20  # well past a runfeed's start-up on a busy machine
        while time.monotonic() < deadline:
            assert standby.alive(), standby.output()[-2000:]
            assert duplicate_trade_ids(stack) == []  # one tape, not two interleaved ones
            assert signal_sources(stack, since) == []  # one strategy instance per instrument
            assert pushed_tapes_interleaved(client) == []  # browsers see one series
            await asyncio.sleep(1)
        assert tick_count(stack) > before  # the holder goes on recording
    finally:
        await client.stop()
        await asyncio.to_thread(stack.stop, standby)


def test_kill_9_of_the_runfeed_keeps_web_ready_shows_the_feed_blocked_and_the_standby_resumes(stack: Stack) -> None:
    standby = stack.start("feed", name="feed-standby")
    try:
        time.sleep(5)
        assert standby.alive(), standby.output()[-2000:]
        holder = named(stack, "feed")
        stack.stop(holder, signal.SIGKILL)
        killed_at_ns = time.time_ns()
        seen: list[str | None] = []

        def blocked_while_ready() -> bool:
            assert stack.get(WEB_A, "/readyz")[0] == 200, "a dead feed must not pull the web processes"
            seen.append(feed_status(stack, WEB_A))
            return seen[-1] == "BLOCKED"

        wait_for(blocked_while_ready, timeout_s=20, what=f"feed:sim BLOCKED on /internal/health (saw {seen})")
        wait_for(
            lambda: stack.scalar("SELECT count(*) FROM feeds_tick WHERE ts_recv > %s", killed_at_ns) > 0,
            timeout_s=30,
            what="the standby recording ticks",
        )
        assert stack.get(WEB_A, "/readyz")[0] == 200
        assert duplicate_trade_ids(stack) == []
        assert trade_id_gaps(stack) == []
    finally:
        # Leave one feed process running for the scenarios below, under the usual name.
        stack.stop(standby)
        if not named(stack, "feed").alive():
            stack.start("feed")


def test_with_two_beats_only_one_runs_the_jobs(stack: Stack) -> None:
    second = stack.start("beat", name="beat-second")
    try:
        time.sleep(3)  # both beats up
        worker_log = named(stack, "worker").output
        start = job_runs(worker_log())
        window_s = 10
        time.sleep(window_s)
        runs = job_runs(worker_log()) - start
        assert second.alive(), second.output()[-2000:]  # waits, does not crash
        assert runs <= window_s + 1, f"{runs} runs of a 1 s job in {window_s} s: both beats scheduled it"
    finally:
        stack.stop(second)


def test_after_a_worker_outage_the_backlog_does_not_burst(stack: Stack) -> None:
    stack.stop(named(stack, "worker"))
    time.sleep(6)  # beat keeps scheduling a 1 s job: 6 runs fall due while no worker takes them
    worker = stack.start("worker", name="worker-after-outage")
    wait_for(lambda: " ready." in worker.output(), timeout_s=60, what="the worker ready")
    time.sleep(2)
    burst = job_runs(worker.output())
    assert burst <= 3, f"{burst} runs of a 1 s job within 2 s of the worker's return: the backlog burst"


def test_an_hour_after_the_feed_died_a_prune_still_lists_it(stack: Stack) -> None:
    stack.stop(named(stack, "feed"), signal.SIGKILL)
    # An hour later, as the rows see it: the dead feed process last reported two hours ago.
    stack.sql(
        "UPDATE tradingsite_componenthealth SET updated_at = now() - interval '2 hours' "
        "WHERE component NOT LIKE 'job:%%' AND component NOT LIKE 'web%%'"
    )
    code = "import django; django.setup(); from tradingsite.tasks import prune_component_health as p; print(p())"
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        env={**stack.env, "DJANGO_SETTINGS_MODULE": "tradingsite.settings"},
        check=True,
        timeout=60,
        capture_output=True,
    )
    assert feed_status(stack, WEB_A) == "BLOCKED"  # listed, never vanished
    assert stack.get(WEB_A, "/readyz")[0] == 200  # and a web process still answers for itself
