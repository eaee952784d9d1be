"""A migrated SQLite database for the tests that start the site's own processes.

`manage.py migrate` on a fresh SQLite file costs a Django start and every migration (about
ten seconds of CPU); a dozen subprocess tests each did it. The first caller in a test
session migrates one template VAR_DIR the same way; every caller gets a copy of its
database. The smoke test of the operator's path still runs the real `manage.py migrate`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TEMPLATE: list[Path] = []


def _template_database() -> Path:
    if not _TEMPLATE:
        var_dir = Path(tempfile.mkdtemp(prefix="ts-migrated-"))
        atexit.register(shutil.rmtree, var_dir, ignore_errors=True)
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            cwd=ROOT,
            env={**env, "VAR_DIR": str(var_dir)},
            check=True,
            timeout=600,
        )
        database = var_dir / "db.sqlite3"
        # The site runs SQLite in WAL mode: fold the log into the file so a plain copy is whole.
        with sqlite3.connect(database) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.close()
        _TEMPLATE.append(database)
    return _TEMPLATE[0]


def migrated_var_dir(var_dir: Path | str) -> Path:
    """Give `var_dir` (created if missing) the database `manage.py migrate` leaves; return its path."""
    target = Path(var_dir)
    target.mkdir(parents=True, exist_ok=True)
    database = target / "db.sqlite3"
    shutil.copyfile(_template_database(), database)
    return database
