"""No persistent database connections in an ASGI web process; the others keep theirs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tradingsite.settings.database import conn_max_age, serves_asgi

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "asgi"),
    [
        (["/srv/.venv/bin/daphne", "-b", "0.0.0.0", "tradingsite.asgi:application"], True),
        (["/usr/lib/python3/site-packages/daphne/__main__.py", "tradingsite.asgi:application"], True),
        (["uvicorn", "tradingsite.asgi:application"], True),
        (["manage.py", "runsite", "--port", "8000"], True),
        (["manage.py", "runserver"], True),
        (["manage.py", "runfeed", "--feed", "sim"], False),
        (["/srv/.venv/bin/celery", "-A", "tradingsite", "worker"], False),
        (["manage.py", "migrate"], False),
        ([], False),
    ],
)
def test_which_processes_serve_asgi(argv: list[str], asgi: bool) -> None:
    assert serves_asgi(argv) is asgi
    assert conn_max_age(argv, 60) == (0 if asgi else 60)


PRINT_AGE = (
    "from django.conf import settings; db = settings.DATABASES['default']; "
    "print(db['CONN_MAX_AGE'], db['OPTIONS']['connect_timeout'])"
)


def _settings_age(argv0: str, *args: str, configured: str = "120") -> int:
    """CONN_MAX_AGE as a process started as `argv0 args...` loads the settings."""
    script = f"import sys; sys.argv = {[argv0, *args]!r}; import django; django.setup(); {PRINT_AGE}"
    env = {
        **os.environ,
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/never-connected",
        "DB_CONN_MAX_AGE": configured,
        "DJANGO_SETTINGS_MODULE": "tradingsite.settings",
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    age, connect_timeout = out.stdout.strip().splitlines()[-1].split()
    assert connect_timeout == "5"  # a silent database fails a connect (and /readyz) in bounded time
    return int(age)


def test_the_settings_give_daphne_no_persistent_connection_and_runfeed_its_configured_age() -> None:
    assert _settings_age("/srv/.venv/bin/daphne", "tradingsite.asgi:application") == 0
    assert _settings_age("manage.py", "runfeed", "--feed", "sim") == 120
