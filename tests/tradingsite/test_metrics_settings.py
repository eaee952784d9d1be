"""Metrics settings that cannot work stop the process at start with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _check(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PROMETHEUS_MULTIPROC_DIR")}
    env.update({"VAR_DIR": str(tmp_path / "var"), **variables})
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"METRICS_PEERS": "feed:9100"}, "METRICS_PEERS: 'feed:9100' is not an http(s) URL"),
        ({"PROMETHEUS_MULTIPROC_DIR": ""}, "PROMETHEUS_MULTIPROC_DIR='' is not a directory"),
        ({"PROMETHEUS_MULTIPROC_DIR": "/nonexistent/metrics"}, "PROMETHEUS_MULTIPROC_DIR='/nonexistent/metrics'"),
        ({"WORKER_METRICS_PORT": "ninety"}, "WORKER_METRICS_PORT"),
    ],
)
def test_a_setting_that_cannot_work_stops_the_process(tmp_path: Path, variables: dict[str, str], message: str) -> None:
    result = _check(tmp_path, **variables)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
    assert not list(tmp_path.glob("*.db"))  # no metrics files left in the working directory


def test_a_directory_that_exists_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "metrics").mkdir()
    result = _check(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"))
    assert result.returncode == 0, result.stderr[-2000:]
