"""The vocabulary other apps use to talk about broker tokens.

Feeds and orders import from here (and from recovery.datasource), never from recovery's
models or services: a token is named by a TokenKey, handed out as an AccessToken, and
refused with a TokenUnavailable error.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from enum import StrEnum
from typing import NoReturn


class TokenKind(StrEnum):
    # A user's daily OAuth login: live trading (orders, positions, holdings).
    OAUTH = "oauth"
    # Provisioned by an operator as a mounted file: market feed and historical candles.
    ANALYTICS = "analytics"
    # Provisioned: sandbox order placement.
    SANDBOX = "sandbox"

    @property
    def provisioned(self) -> bool:
        return self is not TokenKind.OAUTH


class TokenState(StrEnum):
    VALID = "VALID"
    AWAITING_AUTH = "AWAITING_AUTH"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class TokenKey:
    """One token slot: a broker and the kind of token it issues."""

    broker: str
    kind: TokenKind

    def __str__(self) -> str:
        return f"{self.broker}/{self.kind.value}"


def token_fingerprint(secret: str) -> str:
    """Return a short, stable, non-reversible identity for a token (safe to log and show)."""
    return hashlib.sha256(secret.encode()).hexdigest()[:16]


class AccessToken:
    """A bearer token that does not print itself.

    repr(), str() and format() show only the fingerprint, so a token passed to a log
    call or a template by mistake leaks nothing. `reveal()` is the one way out, for the
    Authorization header.
    """

    __slots__ = ("_secret", "fingerprint")

    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("an access token cannot be empty")
        self._secret = secret
        self.fingerprint = token_fingerprint(secret)

    def reveal(self) -> str:
        return self._secret

    def authorization_header(self) -> str:
        return f"Bearer {self._secret}"

    def __repr__(self) -> str:
        return f"AccessToken(fingerprint={self.fingerprint})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AccessToken) and hmac.compare_digest(self._secret, other._secret)

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __reduce__(self) -> NoReturn:
        # Pickling would carry the secret into caches and task queues.
        raise TypeError("AccessToken cannot be pickled")


# The reason a manager reports before its first read; watchers skip it.
NOT_LOADED = "not loaded yet"


@dataclass(frozen=True, slots=True)
class TokenStatus:
    """A token slot's state as other components see it: no secret inside."""

    key: TokenKey
    state: TokenState
    reason: str = ""
    fingerprint: str = ""
    # Bumps on every change; lets watchers tell "same state again" from "no change".
    version: int = 0


class TokenError(Exception):
    """Base of the token errors; messages never contain a token."""


class TokenUnavailable(TokenError):
    """The token failed terminally (wrong credentials, missing provisioned file): do not retry.

    A datasource that gets this reports DEGRADED with the message and waits to be resumed.
    """

    def __init__(self, key: TokenKey, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class TokenBlackout(TokenError):
    """The broker issues no tokens right now (Upstox: 03:30-08:00 IST)."""


class AuthCodeRejected(TokenError):
    """The broker refused this authorization code; the token state is unchanged."""


class NonRecoverableTokenError(TokenError):
    """The broker refused the app itself (client id, secret, redirect URI): logging in again cannot help."""

    def __init__(self, message: str, *, error_code: str = "") -> None:
        super().__init__(message)
        self.error_code = error_code


class TokenExchangeUnavailable(TokenError):
    """The broker's token endpoint failed transiently (timeout, 5xx, rate limit); retry later."""


class TokenEncryptionNotConfigured(TokenError):
    """TOKEN_ENCRYPTION_KEY is empty: broker tokens cannot be stored."""
