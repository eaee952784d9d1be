"""Fixtures shared by the backtesting tests."""

from __future__ import annotations

import random
import threading
from types import SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A 3,000-tick random walk of BTC-USD as a tick CSV file (one per test module)."""
    rng = random.Random(7)
    path = tmp_path_factory.mktemp("sweep") / "walk.csv"
    price, ts = 100.0, 1_764_460_800_000
    lines = ["ts_ms,symbol,price,volume"]
    for _ in range(3_000):
        price *= 1 + rng.gauss(0, 0.002)
        ts += rng.randint(100, 2_000)
        lines.append(f"{ts},BTC-USD,{price:.2f},{rng.randint(1, 40) / 10}")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


class HeldThreads:
    """The embedded default's background job threads, held until the test runs them.

    On the in-memory SQLite test database a write of a job's thread fails at once when the
    test's own thread reads at the same moment (a shared-cache table lock, which never
    waits): a test that polls the job's row while it runs is flaky there. The threads the
    services start are kept instead, and `finish()` starts them and waits for them while
    the test touches nothing.
    """

    def __init__(self) -> None:
        self.held: list[threading.Thread] = []
        holder = self

        class Held(threading.Thread):
            def start(self) -> None:
                holder.held.append(self)

        self.module = SimpleNamespace(Thread=Held)

    def finish(self, *, timeout_s: float = 60.0) -> list[str]:
        """Run every held thread to its end; their names."""
        names = []
        while self.held:
            thread = self.held.pop(0)
            threading.Thread.start(thread)
            thread.join(timeout_s)
            assert not thread.is_alive(), f"{thread.name} still running after {timeout_s}s"
            names.append(thread.name)
        return names


@pytest.fixture
def held_threads(monkeypatch: pytest.MonkeyPatch) -> HeldThreads:
    from backtesting import services, sweep_services

    threads = HeldThreads()
    monkeypatch.setattr(services, "threading", threads.module)
    monkeypatch.setattr(sweep_services, "threading", threads.module)
    return threads
