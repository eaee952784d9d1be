"""`manage.py runsite` end to end: ready, login, live prices over the websocket, clean SIGTERM."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import websockets

from tests.helpers import eventually, wait_site_ready
from tests.helpers_migrated import migrated_var_dir
from tradingsite.demo import DEMO_INSTRUMENTS

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "smoke-test-password-42"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def site_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update({"VAR_DIR": str(tmp_path / "var"), "DEMO_PASSWORD": PASSWORD, "DASHBOARD_PUSH_INTERVAL_S": "0.1"})
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def login(base: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode({"username": "demo", "password": PASSWORD, "csrfmiddlewaretoken": token})
    request = urllib.request.Request(f"{base}/login/", data=form.encode(), headers={"Referer": f"{base}/login/"})
    dashboard = opener.open(request)
    assert dashboard.geturl() == f"{base}/"
    assert "Live prices" in dashboard.read().decode()
    return "; ".join(f"{c.name}={c.value}" for c in jar)


async def receive_prices(url: str, cookie: str, origin: str) -> dict[str, str]:
    prices: dict[str, str] = {}
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": origin}) as socket_:
        while len(prices) < len(DEMO_INSTRUMENTS):
            message = json.loads(await asyncio.wait_for(socket_.recv(), timeout=10))
            if message["type"] == "prices":
                prices.update({row["symbol"]: row["price"] for row in message["prices"]})
    return prices


def test_runsite_serves_live_prices_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    env = site_env(tmp_path)
    manage(env, "migrate", "--noinput", "-v0")
    assert "password set from DEMO_PASSWORD" in manage(env, "loaddemo")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "runsite.log").open("w+")
    site = subprocess.Popen(
        [sys.executable, "manage.py", "runsite", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_site_ready(base, site)
        cookie = login(base)
        prices = asyncio.run(receive_prices(f"ws://127.0.0.1:{port}/ws/dashboard/", cookie, base))
        assert set(prices) == {symbol for symbol, *_ in DEMO_INSTRUMENTS}
        site.send_signal(signal.SIGTERM)
        assert site.wait(timeout=30) == 0
    finally:
        if site.poll() is None:
            site.kill()
            site.wait()
        log.seek(0)
        output = log.read()
        log.close()
    assert "runtime: stopped cleanly" in output, output
    # Daphne's reactor and the runtime share one uvloop loop where uvloop exists.
    assert "site: web and runtime on uvloop" in output, output


def test_runsite_exits_non_zero_when_a_named_feed_does_not_exist(tmp_path: Path) -> None:
    env = site_env(tmp_path)
    migrated_var_dir(env["VAR_DIR"])
    result = subprocess.run(
        [sys.executable, "manage.py", "runsite", "--port", str(free_port()), "--feed", "nope"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "no enabled feed named nope" in result.stdout + result.stderr


def test_runfeed_streams_without_the_web_and_stops_on_sigint(tmp_path: Path) -> None:
    env = site_env(tmp_path)
    migrated_var_dir(env["VAR_DIR"])
    manage(env, "loaddemo")
    feed = subprocess.Popen(
        [sys.executable, "manage.py", "runfeed", "--feed", "sim"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        probe = (
            "import django; django.setup(); from core.selectors import component_health_effective as c; "
            "print(sorted((v.component, v.status.value) for v in c()))"
        )

        def streaming() -> bool:
            assert feed.poll() is None, "runfeed exited early"
            out = subprocess.run(
                [sys.executable, "-c", probe],
                cwd=ROOT,
                env={**env, "DJANGO_SETTINGS_MODULE": "tradingsite.settings"},
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
            return "('feed:sim', 'HEALTHY')" in out and "('runtime:feed:sim', 'HEALTHY')" in out

        eventually(streaming, timeout_s=60, interval_s=0.5)
        feed.send_signal(signal.SIGINT)
        output, _ = feed.communicate(timeout=30)
        assert feed.returncode == 0, output
        assert "runfeed: stopped" in output
        # The feed process runs on uvloop where it exists (everywhere but Windows).
        assert "runfeed: starting sim on uvloop" in output
    finally:
        if feed.poll() is None:
            feed.kill()
            feed.wait()


def test_runserver_is_runsite_with_djangos_addrport_argument(tmp_path: Path) -> None:
    env = site_env(tmp_path)
    migrated_var_dir(env["VAR_DIR"])
    port = free_port()
    site = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_site_ready(f"http://127.0.0.1:{port}", site)
        site.send_signal(signal.SIGTERM)
        output, _ = site.communicate(timeout=30)
        assert site.returncode == 0, output
        assert f"tradingsite: serving http://127.0.0.1:{port}/" in output
    finally:
        if site.poll() is None:
            site.kill()
            site.wait()
    bad = subprocess.run(
        [sys.executable, "manage.py", "runserver", "127.0.0.1:http"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1
    assert "is not a port number or address:port pair" in bad.stderr


HOLD_SIM = """
from core.leases import take_lease
assert take_lease("feed:sim", owner="elsewhere", ttl_s=3600, holder="runfeed --feed sim on elsewhere pid 7")
"""
FREE_SIM = """
from core.leases import release_lease
assert release_lease("feed:sim", owner="elsewhere")
"""


def test_runsite_waits_while_another_process_runs_its_feed_and_starts_once_it_is_free(tmp_path: Path) -> None:
    env = site_env(tmp_path)
    migrated_var_dir(env["VAR_DIR"])
    manage(env, "loaddemo")
    manage(env, "shell", "-c", HOLD_SIM)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "runsite.log"
    with log_path.open("w") as log:
        site = subprocess.Popen(
            [sys.executable, "manage.py", "runsite", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        said = eventually(
            lambda: "standby: feed:sim is held by runfeed --feed sim on elsewhere pid 7" in log_path.read_text(),
            timeout_s=60,
            interval_s=0.1,
        )
        assert said and site.poll() is None  # waits: two processes never run one feed
        manage(env, "shell", "-c", FREE_SIM)
        wait_site_ready(base, site)
        assert "took over feed:sim" in log_path.read_text()
        site.send_signal(signal.SIGTERM)
        assert site.wait(timeout=30) == 0
    finally:
        if site.poll() is None:
            site.kill()
            site.wait()
    manage(env, "shell", "-c", "from core.leases import lease_holder; assert not lease_holder('feed:sim').owner")
