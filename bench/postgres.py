"""The PostgreSQL database a benchmark measures against, created on first use."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

DEFAULT_BENCH_DB = "postgres://postgres@127.0.0.1:5432/tradingsite_bench"


def use_bench_database(*, bench_url_first: bool = False) -> str:
    """Point Django (before setup) at PostgreSQL: DATABASE_URL if it is one, else
    BENCH_DATABASE_URL, else DEFAULT_BENCH_DB; return the URL.

    `bench_url_first`: BENCH_DATABASE_URL, when set, wins over DATABASE_URL (a benchmark
    that writes thousands of rows per run keeps them out of the development database).
    """
    bench_url = os.environ.get("BENCH_DATABASE_URL", "")
    if bench_url_first and bench_url.startswith("postgres"):
        os.environ["DATABASE_URL"] = bench_url
    elif not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        os.environ["DATABASE_URL"] = bench_url or DEFAULT_BENCH_DB
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    return os.environ["DATABASE_URL"]


def ensure_database(url: str) -> None:
    """Create the database named in `url` when it does not exist yet."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
