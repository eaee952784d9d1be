"""Without chromium the browser tests skip with the reason; under REQUIRE_SERVICES=1 or
REQUIRE_CHROMIUM=1 they fail.

Runs pytest on tests/e2e in a subprocess with CHROMIUM_PATH pointing at a file that does
not exist, so the outcome is what `make test` prints on a machine without the browser.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run_browser_tests(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "REQUIRE_SERVICES", "REQUIRE_CHROMIUM")
    }
    base.update({"VAR_DIR": str(tmp_path / "var"), "CHROMIUM_PATH": str(tmp_path / "no-chromium"), **env})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "tests/e2e"],
        cwd=ROOT,
        env=base,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_without_chromium_the_browser_tests_skip_and_say_why(tmp_path: Path) -> None:
    result = _run_browser_tests(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" not in result.stdout and "failed" not in result.stdout
    assert f"needs Chromium at {tmp_path / 'no-chromium'}: apt-get install chromium" in result.stdout
    assert " skipped" in result.stdout.splitlines()[-1]


@pytest.mark.parametrize("variable", ["REQUIRE_SERVICES", "REQUIRE_CHROMIUM"])
def test_under_require_services_a_missing_chromium_fails_the_browser_tests(tmp_path: Path, variable: str) -> None:
    result = _run_browser_tests(tmp_path, **{variable: "1"})
    assert result.returncode == 1, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    # Failed in setup, before any browser starts: pytest counts those as errors.
    assert " error" in last and "passed" not in last and "skipped" not in last
    assert f"{variable}=1 but needs Chromium at" in result.stdout
