"""The browser's live mark-to-market uses the server's scale and rounding: its fixed-point
helpers in static/dashboard.js, run in node, agree with feeds.market and orders.money."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from core.fixed_point import fixed_to_str
from feeds.market import parse_fixed
from orders.money import notional

SCRIPT = Path(__file__).resolve().parents[2] / "static" / "dashboard.js"
START, END = "const SCALE_DIGITS", "function markPositions"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")


def run_helpers(cases: list[list[str]]) -> list[dict[str, str]]:
    source = SCRIPT.read_text()
    helpers = source[source.index(START) : source.index(END)]
    program = (
        helpers
        + f"""
const out = {json.dumps(cases)}.map(([q, p, m]) => ({{
  parsed: toFixed(p).toString(),
  text: fixedToText(toFixed(p)),
  notional: divideHalfEven(toFixed(q) * toFixed(p) * toFixed(m), SCALE * SCALE).toString(),
}}));
console.log(JSON.stringify(out));
"""
    )
    result = subprocess.run(["node", "-e", program], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(result.stdout)


def test_the_browser_parses_prints_and_rounds_twelve_places_like_the_server() -> None:
    cases = [
        ["1000000", "0.000000000012", "1"],
        ["0.000000000001", "15000000.123456789012", "1"],
        ["3", "0.000000000005", "0.5"],  # 7.5 units: half-even rounds to 8
        ["0.001", "-64000.000000000001", "0.001"],
    ]
    for (quantity, price, multiplier), got in zip(cases, run_helpers(cases)):
        assert got["parsed"] == str(parse_fixed(price))
        assert got["text"] == fixed_to_str(parse_fixed(price)) == price
        q, p, m = parse_fixed(quantity), parse_fixed(price), parse_fixed(multiplier)
        if p >= 0:
            assert got["notional"] == str(notional(q, p, m))
        else:  # orders.money takes non-negative values; the browser mirrors the sign
            assert got["notional"] == str(-notional(q, -p, m))
