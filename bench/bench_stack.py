"""The multi-process stack on this machine: the Procfile's processes on PostgreSQL + Redis.

Starts two web processes (runweb), one `runfeed --feed sim` with the simulated venue at
its fastest (a round of trades every 10 ms over five instruments), a Celery worker and
beat, exactly as tests/multiprocess does, and prints:
- ticks/s recorded (rows landing in feeds_tick, the recorder's COPY path);
- prices/s pushed to two logged-in websocket clients, one on each web process (the
  dashboard's conflated pushes at DASHBOARD_PUSH_INTERVAL_S, the production default);
- CPU (% of one core) and resident memory of every process over the same window, the
  figures docs/deployment.md sizes a machine with;
- failover time from `kill -9` of the runfeed to the first tick recorded by a standby
  runfeed: "n/a: no standby" while a second runfeed records alongside the first instead
  of waiting (the feed lease makes it a standby).

Needs PostgreSQL and Redis: DATABASE_URL (a database named <name>_stack is created and
dropped), else postgres://postgres@127.0.0.1:5432/tradingsite_bench; REDIS_URL, else
redis://127.0.0.1:6379/0 (that Redis database is flushed). Web ports: BENCH_STACK_PORT
and the next one (default 8711).

    .venv/bin/python bench/bench_stack.py [--window S]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.postgres import DEFAULT_BENCH_DB  # noqa: E402
from tests.multiprocess.stack import DashboardClient, Process, Stack, running_stack  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def usage(pid: int) -> tuple[float, int]:
    """CPU seconds and resident bytes of `pid` and its descendants (a worker's pool processes)."""
    tree, todo, cpu, rss = _children(), [pid], 0.0, 0
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        rss += int(fields[21]) * PAGE
        todo.extend(tree.get(current, []))
    return cpu, rss


def ticks(stack: Stack) -> int:
    return int(stack.scalar("SELECT count(*) FROM feeds_tick"))


async def measure(stack: Stack, ports: tuple[int, int], processes: list[Process], window_s: float) -> None:
    clients = [DashboardClient(stack, port) for port in ports]
    for client in clients:
        client.start()
    deadline = time.monotonic() + 90
    while not all(c.prices() for c in clients):
        if time.monotonic() > deadline:
            raise SystemExit("bench_stack: no prices pushed within 90 s")
        await asyncio.sleep(0.2)
    await asyncio.sleep(3)  # past the start-up burst
    before_ticks, before_prices = ticks(stack), [c.prices() for c in clients]
    before_usage = {p.name: usage(p.popen.pid) for p in processes}
    started = time.monotonic()
    await asyncio.sleep(window_s)
    elapsed = time.monotonic() - started
    after_usage = {p.name: usage(p.popen.pid) for p in processes}
    recorded = (ticks(stack) - before_ticks) / elapsed
    pushed = [(c.prices() - b) / elapsed for c, b in zip(clients, before_prices, strict=True)]
    for client in clients:
        await client.stop()
    print(f"ticks recorded:            {recorded:10,.0f} /s  (sim feed, 5 instruments, a round every 10 ms)")
    for port, rate in zip(ports, pushed, strict=True):
        print(f"prices pushed, web :{port}: {rate:10,.1f} /s  to one websocket client")
    print(f"prices pushed, both:       {sum(pushed):10,.1f} /s")
    print("process             CPU % of a core    RSS MB")
    for name, (cpu_before, _) in before_usage.items():
        cpu_after, rss = after_usage[name]
        print(f"  {name:18s} {100 * (cpu_after - cpu_before) / elapsed:10.1f} {rss / 2**20:12.0f}")


def failover(stack: Stack) -> None:
    holder = [p for p in stack.processes if p.name == "feed"][-1]
    standby = stack.start("feed", name="feed-standby")
    since = stack.scalar("SELECT now()")
    time.sleep(20)  # well past the standby's start-up
    duplicates = stack.scalar(
        "SELECT count(*) FROM (SELECT 1 FROM feeds_tick WHERE trade_id <> '' "
        "GROUP BY instrument_id, trade_id HAVING count(*) > 1) d"
    )
    # A second runfeed that is no standby runs its own strategy executions beside the first's.
    doubled = stack.scalar(
        "SELECT count(*) FROM (SELECT 1 FROM processor_strategysignal WHERE emitted_at > %s "
        "GROUP BY strategy_id, symbol HAVING count(DISTINCT split_part(output_id, ':', 1)) > 1) d",
        since,
    )
    if not standby.alive() or duplicates or doubled:
        reason = (
            "it exited"
            if not standby.alive()
            else f"it runs too: {duplicates} duplicate trade ids, {doubled} strategies signalling twice"
        )
        print(f"failover (kill -9 -> resumed ticks): n/a: no standby ({reason})")
        return
    stack.stop(holder, signal.SIGKILL)
    killed_ns, killed = time.time_ns(), time.monotonic()
    while time.monotonic() - killed < 120:
        if stack.scalar("SELECT count(*) FROM feeds_tick WHERE ts_recv > %s", killed_ns):
            print(f"failover (kill -9 -> resumed ticks): {time.monotonic() - killed:.1f} s")
            return
        time.sleep(0.1)
    print("failover (kill -9 -> resumed ticks): n/a: no standby (no tick within 120 s of the kill)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=15.0, help="seconds measured")
    args = parser.parse_args()
    base = os.environ.get("DATABASE_URL", "")
    base = base if base.startswith("postgres") else os.environ.get("BENCH_DATABASE_URL", DEFAULT_BENCH_DB)
    parts = urlsplit(base)
    database_url = parts._replace(path=parts.path.rstrip("/") + "_stack").geturl()
    redis_url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    port = int(os.environ.get("BENCH_STACK_PORT", "8711"))
    ports = (port, port + 1)
    print(f"machine: {os.cpu_count()} cores; PostgreSQL {database_url.rsplit('@', 1)[-1]}, Redis {redis_url}")
    # The production cadences (the tests' short ones would cost CPU a deployment does not spend).
    extra = {
        "STACK_TICK_INTERVAL_MS": "10",
        "DASHBOARD_PUSH_INTERVAL_S": "0.25",
        "DASHBOARD_BROWSER_INTERVAL_S": "0.25",
        "HEALTH_REPORT_INTERVAL_S": "2",
        "HEALTH_STALE_AFTER_S": "15",
        "PERIODIC_JOB_INTERVALS": "",
        "LOG_LEVEL": "WARNING",
    }
    with (
        tempfile.TemporaryDirectory(prefix="bench-stack-") as var_dir,
        running_stack(database_url, redis_url, Path(var_dir), port, extra_env=extra) as stack,
    ):
        webs = [stack.start("web", name=f"web-{p}", port=p) for p in ports]
        processes = [*webs, stack.start("feed"), stack.start("worker"), stack.start("beat")]
        for p, process in zip(ports, webs, strict=True):
            stack.wait_ready(p, process)
        asyncio.run(measure(stack, ports, processes, args.window))
        failover(stack)


if __name__ == "__main__":
    main()
