"""The database: SQLite under VAR_DIR by default, any django-environ DATABASE_URL otherwise."""

from __future__ import annotations

from tradingsite.settings.base import VAR_DIR, env

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
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
