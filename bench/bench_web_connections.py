"""PostgreSQL connections a daphne web process holds after a burst of requests.

Starts daphne twice against PostgreSQL: as deployed (the settings see an ASGI server:
CONN_MAX_AGE=0) and disguised under another program name, so the settings keep
DB_CONN_MAX_AGE=60 as they did before. Each gets the same burst of concurrent /readyz
requests; then the connections each left open are counted in pg_stat_activity (by
application_name). Prints figures, asserts nothing.

    .venv/bin/python bench/bench_web_connections.py     (BENCH_REQUESTS=80)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.postgres import ensure_database, use_bench_database

ROOT = Path(__file__).resolve().parents[1]
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "80"))
DAPHNE = "from daphne.cli import CommandLineInterface; CommandLineInterface.entrypoint()"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def held(url: str, name: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()
    return int(row[0]) if row else 0


def burst(port: int) -> float:
    def get(_: int) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=30) as response:
            return int(response.status)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=min(REQUESTS, 40)) as pool:
        statuses = list(pool.map(get, range(REQUESTS)))
    assert set(statuses) == {200}, statuses
    return time.monotonic() - started


def run(url: str, argv0: str, name: str) -> tuple[int, float]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": f"{url}?application_name={name}", "REDIS_URL": "", "PYTHONPATH": str(ROOT)}
    script = f"import sys; sys.argv = {[argv0, '-b', '127.0.0.1', '-p', str(port), 'tradingsite.asgi:application']!r}; {DAPHNE}"
    web = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or web.poll() is not None:
                    raise RuntimeError("daphne did not start") from None
                time.sleep(0.2)
        elapsed = burst(port)
        return held(url, name), elapsed
    finally:
        web.terminate()
        web.wait(timeout=20)


def main() -> None:
    url = use_bench_database()
    ensure_database(url)
    for label, argv0, name in (
        ("daphne as deployed (CONN_MAX_AGE=0)", "daphne", "bench-web-asgi"),
        ("daphne with CONN_MAX_AGE=60 (before)", "web-legacy", "bench-web-persistent"),
    ):
        connections, elapsed = run(url, argv0, name)
        print(f"{label}: {REQUESTS} concurrent /readyz in {elapsed:.2f}s, {connections} connections left open")


if __name__ == "__main__":
    main()
