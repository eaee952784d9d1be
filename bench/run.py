"""Run every bench/bench_*.py in its own process and print its figures.

Each bench is a script with a `main()` that prints figures and asserts nothing about
time. They run one after another (a bench sharing the CPU with another would measure
both), each in a fresh interpreter so one bench's caches and threads cannot colour the
next. Exit status is non-zero when any bench failed to run.

    .venv/bin/python bench/run.py [name ...]     (names without bench_ and .py)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def bench_files(names: list[str]) -> list[Path]:
    files = sorted(BENCH_DIR.glob("bench_*.py"))
    if names:
        wanted = {f"bench_{name}.py" for name in names}
        files = [path for path in files if path.name in wanted]
        missing = wanted - {path.name for path in files}
        if missing:
            raise SystemExit(f"bench/run.py: no such bench: {', '.join(sorted(missing))}")
    return files


def main(argv: list[str]) -> int:
    failed = []
    for path in bench_files(argv):
        print(f"== {path.name}", flush=True)
        started = time.monotonic()
        # Figures, not runtime chatter: the runtime's INFO lines would bury them.
        env = {"LOG_LEVEL": "WARNING", **os.environ}
        result = subprocess.run([sys.executable, str(path)], cwd=BENCH_DIR.parent, env=env)
        print(
            f"== {path.name}: {'ok' if result.returncode == 0 else f'exit {result.returncode}'} "
            f"in {time.monotonic() - started:.1f}s\n",
            flush=True,
        )
        if result.returncode != 0:
            failed.append(path.name)
    if failed:
        print(f"bench/run.py: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
