"""Fixtures shared by the backtesting tests."""

from __future__ import annotations

import random

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
