"""Secrets for a local checkout, generated once into var/ so restarts keep sessions.

Only used when DEBUG is on; production takes every secret from the environment.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path


def read_or_create(path: Path, generate: Callable[[], str]) -> str:
    """Return the secret stored at `path`, creating it with `generate()` the first time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        value = generate()
        # O_EXCL: two processes starting at once must agree on one secret.
        try:
            with open(path, "x") as handle:
                handle.write(value)
            path.chmod(0o600)
        except FileExistsError:
            return path.read_text().strip()
        return value


def new_secret_key() -> str:
    return secrets.token_urlsafe(50)


def new_fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()
