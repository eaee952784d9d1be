"""The database: SQLite under VAR_DIR by default, any django-environ DATABASE_URL otherwise.

Connections and the process kind (PostgreSQL):
- An ASGI server (daphne, uvicorn, hypercorn, gunicorn, and `manage.py runsite`/`runserver`, which
  run daphne) closes its connection after every request: CONN_MAX_AGE=0, whatever
  DB_CONN_MAX_AGE says. Django runs each request's sync code in a thread of its own
  choosing and closes "old" connections from the request signals, so under ASGI a
  persistent connection is left behind per thread instead of being reused (one web
  process held about 20). Django's documentation says to disable persistent connections
  under ASGI; put a pooler (PgBouncer) in front of PostgreSQL if connects get costly.
- runfeed, the Celery worker and beat keep a connection for DB_CONN_MAX_AGE seconds
  (default 60). Their database calls run in one known thread (Channels'
  database_sync_to_async, a Celery pool process) and are wrapped in
  close_old_connections(), so a persistent connection is reused and aged out: one or
  two per process, not one per request.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from tradingsite.settings.base import VAR_DIR, env

# gunicorn only serves this site through an ASGI worker (the site has no WSGI module).
ASGI_SERVERS = ("daphne", "uvicorn", "hypercorn", "gunicorn")
ASGI_COMMANDS = ("runsite", "runserver")


def serves_asgi(argv: Sequence[str]) -> bool:
    """Whether this process is an ASGI web server, judged by how it was started."""
    if not argv:
        return False
    program = os.path.basename(argv[0])
    if program in ASGI_SERVERS or any(f"{server}{os.sep}" in argv[0] for server in ASGI_SERVERS):
        return True  # "daphne ..." or "python -m daphne ..." (argv[0] is .../daphne/__main__.py)
    return program == "manage.py" and len(argv) > 1 and argv[1] in ASGI_COMMANDS


def conn_max_age(argv: Sequence[str], configured: int) -> int:
    return 0 if serves_asgi(argv) else configured


DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the runtime write ticks while the web reads; IMMEDIATE avoids
    # "database is locked" on read-then-write transactions.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA busy_timeout=5000",
        "transaction_mode": "IMMEDIATE",
    }
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    # The closed-trades index carries its page's columns (INCLUDE) for PostgreSQL's
    # index-only reads; SQLite keeps the key columns only, which still orders the pages.
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
else:
    DATABASES["default"]["CONN_MAX_AGE"] = conn_max_age(sys.argv, env.int("DB_CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # A database that does not answer (rather than refusing) fails /readyz within this
    # bound instead of the operating system's TCP timeout.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("DB_CONNECT_TIMEOUT", default=5)
    )
