"""The PostgreSQL database a benchmark measures against, created on first use."""
from __future__ import annotations

from urllib.parse import urlsplit


def ensure_database(url: str) -> None:
    """Create the database named in `url` when it does not exist yet."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
