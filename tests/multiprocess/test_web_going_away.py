"""Both web entry points close the dashboard's websockets with 1001 (going away) on SIGTERM.

The embedded default (SQLite, in-memory layer): `manage.py runweb` (the scale-out web
process) and `manage.py runsite` (web and runtime in one process), each a real
subprocess on a free port with a logged-in websocket client.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import websockets

from tests.helpers import async_eventually, eventually
from tests.helpers_migrated import migrated_var_dir

ROOT = Path(__file__).resolve().parents[2]
# The web processes run on their own VAR_DIR's SQLite and in-memory layer in every pass.
pytestmark = pytest.mark.embedded_site

SESSION = """
import django, json; django.setup()
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
user = get_user_model().objects.create_user("web", password="going-away-4242")
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(json.dumps(session.session_key))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def site_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str]:
    var_dir = tmp_path_factory.mktemp("going-away")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env["VAR_DIR"] = str(var_dir)
    migrated_var_dir(var_dir)
    out = subprocess.run(
        [sys.executable, "-c", SESSION],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "tradingsite.settings"},
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    ).stdout
    return env, json.loads(out.strip().splitlines()[-1])


def start_web(command: str, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", command, "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


@pytest.mark.parametrize("command", ["runweb", "runsite"])
async def test_sigterm_closes_the_dashboard_socket_with_going_away(
    site_env: tuple[dict[str, str], str], command: str
) -> None:
    env, session_key = site_env
    port = free_port()
    process = start_web(command, port, env)
    try:
        headers = {"Cookie": f"sessionid={session_key}", "Origin": f"http://127.0.0.1:{port}"}

        async def connected() -> websockets.ClientConnection | None:
            assert process.poll() is None, "the web process exited"
            try:
                return await websockets.connect(f"ws://127.0.0.1:{port}/ws/dashboard/", additional_headers=headers)
            except OSError:
                return None

        ws = await async_eventually(connected, timeout_s=60, interval_s=0.2)
        process.send_signal(signal.SIGTERM)
        with pytest.raises(websockets.ConnectionClosed):
            while True:
                await ws.recv()
        assert ws.close_code == 1001, ws.close_reason  # going away; a dropped socket is 1006
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def web_rows(var_dir: str) -> list[tuple[str, str, str]]:
    import sqlite3

    with contextlib.closing(sqlite3.connect(Path(var_dir) / "db.sqlite3")) as db:
        return db.execute(
            "SELECT component, role, label FROM tradingsite_componenthealth WHERE role = 'web'"
        ).fetchall()


def test_a_web_process_lists_itself_in_the_health_view_and_withdraws_at_a_clean_stop(
    site_env: tuple[dict[str, str], str],
) -> None:
    env, _ = site_env
    port = free_port()
    process = start_web("runweb", port, env)
    try:
        rows = eventually(lambda: web_rows(env["VAR_DIR"]), timeout_s=60, interval_s=0.2)
        assert rows == [("web", "web", f"web:{port}")]
        eventually(lambda: listening(port), timeout_s=60, interval_s=0.2)  # its SIGTERM handler is in place
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        assert web_rows(env["VAR_DIR"]) == []  # a clean stop leaves nothing to go stale
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()
