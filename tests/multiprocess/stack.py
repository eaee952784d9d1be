"""The Procfile's processes, started for real on PostgreSQL + Redis (tests/multiprocess, bench_stack).

Each process runs its own Procfile line through `sh -c` with the virtualenv first on
PATH, so the test exercises the exact commands an operator runs. The stack gets its own
database (created fresh, migrated by the Procfile's `release` line) and the Redis
database of REDIS_URL (flushed first), with DEBUG=0 behind a TLS proxy (the clients
send X-Forwarded-Proto as the proxy would) and short intervals so that health, jobs
and standby take-overs happen within seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
PROCFILE = ROOT / "Procfile"
PASSWORD = "stack-password-4242"
# Short cadences: a stale process shows within seconds, jobs run every second or two.
FAST_SETTINGS = {
    "HEALTH_REPORT_INTERVAL_S": "0.5",
    "HEALTH_STALE_AFTER_S": "4",
    "DASHBOARD_PUSH_INTERVAL_S": "0.1",
    "DASHBOARD_BROWSER_INTERVAL_S": "0.2",
    "PERIODIC_JOB_INTERVALS": "clear-expired-sessions=1,orders-reconcile=2,recovery-token-expiry=5",
    "RUNTIME_STOP_TIMEOUT_S": "5",
    "DB_CONN_MAX_AGE": "0",
    "LOG_LEVEL": "INFO",
}


def procfile(path: Path = PROCFILE) -> dict[str, str]:
    """The Procfile's process types and their commands."""
    entries: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, command = line.partition(":")
            entries[name.strip()] = command.strip()
    return entries


def recreate_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}" WITH (FORCE)')


def flush_redis(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Stack:
    database_url: str
    redis_url: str
    var_dir: Path
    base_port: int
    env: dict[str, str] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    session_key: str = ""

    def __post_init__(self) -> None:
        self.var_dir.mkdir(parents=True, exist_ok=True)
        keep = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "PYTEST_CURRENT_TEST")}
        from cryptography.fernet import Fernet

        self.env = {
            **keep,
            **FAST_SETTINGS,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{keep.get('PATH', '')}",
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "VAR_DIR": str(self.var_dir),
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "TOKEN_ENCRYPTION_KEY": Fernet.generate_key().decode(),
            "BEHIND_TLS_PROXY": "1",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
        }

    # ---- processes ---------------------------------------------------------------
    def command(self, kind: str) -> str:
        return procfile()[kind]

    def start(self, kind: str, *, name: str | None = None, port: int | None = None) -> Process:
        """Start the Procfile's `kind` line (PORT for web); its output goes to VAR_DIR/<name>.log."""
        name = name or kind
        log = self.var_dir / f"{name}.log"
        env = dict(self.env)
        if port is not None:
            env["PORT"] = str(port)
        with log.open("ab") as out:
            popen = subprocess.Popen(
                ["sh", "-c", f"exec {self.command(kind)}"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = Process(name, popen, log)
        self.processes.append(process)
        return process

    def run_release(self) -> None:
        result = subprocess.run(
            ["sh", "-c", self.command("release")],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    def setup_demo(self) -> dict[str, Any]:
        """loaddemo plus fast strategies and a session for the staff user `demo`."""
        code = "import django; django.setup(); from tests.multiprocess.stack_setup import main; main()"
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**self.env, "DJANGO_SETTINGS_MODULE": "tradingsite.settings", "STACK_PASSWORD": PASSWORD},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        info: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
        self.session_key = info["session_key"]
        return info

    def stop(self, process: Process, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        if process.alive():
            os.killpg(process.popen.pid, sig)
            try:
                process.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.popen.pid, signal.SIGKILL)
                process.popen.wait()
        return int(process.popen.returncode)

    def stop_all(self) -> None:
        for process in reversed(self.processes):
            self.stop(process, timeout_s=15)

    # ---- clients -----------------------------------------------------------------
    def url(self, port: int, path: str) -> str:
        return f"http://127.0.0.1:{port}{path}"

    def get(self, port: int, path: str, *, logged_in: bool = False) -> tuple[int, bytes]:
        # As the TLS proxy would: the request came in over HTTPS.
        headers = {"X-Forwarded-Proto": "https", "Host": "127.0.0.1"}
        if logged_in:
            headers["Cookie"] = f"sessionid={self.session_key}"
        request = urllib.request.Request(self.url(port, path), headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, b""

    def internal_health(self, port: int) -> dict[str, Any]:
        status, body = self.get(port, "/internal/health", logged_in=True)
        assert status == 200, (status, body[:500])
        result: dict[str, Any] = json.loads(body)
        return result

    def wait_ready(self, port: int, process: Process, timeout_s: float = 90.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert process.alive(), f"{process.name} exited:\n{process.output()[-3000:]}"
            if self.get(port, "/healthz")[0] == 200:
                return
            time.sleep(0.2)
        raise AssertionError(f"{process.name} did not answer /healthz in {timeout_s}s:\n{process.output()[-3000:]}")

    # ---- the database --------------------------------------------------------------
    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True) as conn:
            cursor = conn.execute(query, args or None)  # type: ignore[arg-type]
            return list(cursor.fetchall()) if cursor.description else []

    def scalar(self, query: str, *args: Any) -> Any:
        rows = self.sql(query, *args)
        return rows[0][0] if rows else None


class DashboardClient:
    """A logged-in websocket client of one web process, acknowledging every batch like dashboard.js."""

    def __init__(self, stack: Stack, port: int) -> None:
        self.stack = stack
        self.port = port
        self.events: list[dict[str, Any]] = []
        self.close_code: int | None = None
        self.connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def count(self, kind: str) -> int:
        return sum(1 for event in self.events if event.get("type") == kind)

    def prices(self) -> int:
        return sum(len(event.get("prices", ())) for event in self.events if event.get("type") == "prices")

    async def run(self) -> None:
        import websockets

        # As a browser behind the TLS proxy connects: an https page origin, the proxy's scheme header.
        headers = {
            "Cookie": f"sessionid={self.stack.session_key}",
            "Origin": f"https://127.0.0.1:{self.port}",
            "X-Forwarded-Proto": "https",
        }
        async with websockets.connect(f"ws://127.0.0.1:{self.port}/ws/dashboard/", additional_headers=headers) as ws:
            self.connected.set()
            try:
                async for message in ws:
                    event = json.loads(message)
                    self.events.append(event)
                    if event.get("seq"):
                        await ws.send(json.dumps({"type": "ack", "seq": event["seq"]}))
            except websockets.ConnectionClosed:
                pass
            self.close_code = ws.close_code

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.get_running_loop().create_task(self.run())
        return self._task

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass


@contextmanager
def running_stack(
    database_url: str, redis_url: str, var_dir: Path, base_port: int, *, extra_env: dict[str, str] | None = None
) -> Iterator[Stack]:
    """A fresh database (dropped after) and Redis db, migrated and loaded; the caller starts the processes."""
    recreate_database(database_url)
    flush_redis(redis_url)
    stack = Stack(database_url=database_url, redis_url=redis_url, var_dir=var_dir, base_port=base_port)
    stack.env.update(extra_env or {})
    try:
        stack.run_release()
        stack.setup_demo()
        yield stack
    finally:
        stack.stop_all()
        drop_database(database_url)
