"""Upstox OAuth: the daily token rules (pure) and the authorization-code exchange.

Facts (Upstox's "Authorize" and "Get Token" API pages):
- login dialog: GET .../v2/login/authorization/dialog?response_type=code&client_id=&redirect_uri=&state=
  -> 302 <redirect_uri>?code=...&state=...; UDAPI100068 = client_id and/or redirect_uri wrong.
- token: POST .../v2/login/authorization/token, form-encoded code, client_id, client_secret,
  redirect_uri, grant_type=authorization_code. The code is single-use even when the call fails.
- a token is valid until 03:30 IST the following day whatever its issue time (made 02:30
  Wed, expires 03:30 Wed); no refresh token. No token requests 03:30-08:00 IST.
- errors: {"status":"error","errors":[{"errorCode","message","propertyPath","invalidValue"}]}.
"""

from __future__ import annotations

import functools
import json
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, timezone
from enum import StrEnum
from typing import Any
from urllib.parse import urlencode

import httpx

from recovery.redaction import register_secret
from recovery.tokens import (
    AccessToken,
    AuthCodeRejected,
    NonRecoverableTokenError,
    TokenBlackout,
    TokenExchangeUnavailable,
    token_fingerprint,
)

IST = timezone(timedelta(hours=5, minutes=30))  # India has no daylight saving time
TOKEN_EXPIRY_IST = time(3, 30)
BLACKOUT_END_IST = time(8, 0)
AUTHORIZE_URL = "https://api.upstox.com/v2/login/authorization/dialog"
TOKEN_URL = "https://api.upstox.com/v2/login/authorization/token"

# Errors that no amount of logging in fixes: the app's own credentials are wrong.
NON_RECOVERABLE_CODES = frozenset(
    {
        "UDAPI100016",  # invalid credentials
        "UDAPI100068",  # client_id and/or redirect_uri incorrect
        "UDAPI100069",  # wrong client id / secret
        "UDAPI100073",  # client_id inactive
    }
)
INVALID_TOKEN_CODE = "UDAPI100050"
RATE_LIMIT_CODE = "UDAPI10005"
UNEXPECTED_CODE = "UDAPI100500"


# ---- the daily token rules (pure) -------------------------------------------------------


def upstox_token_expiry(issued_at: datetime) -> datetime:
    """Return when a token issued at `issued_at` expires: the next 03:30 IST, in UTC."""
    local = issued_at.astimezone(IST)
    expiry = datetime.combine(local.date(), TOKEN_EXPIRY_IST, IST)
    if expiry <= local:
        expiry += timedelta(days=1)
    return expiry.astimezone(UTC)


def upstox_blackout_end(now: datetime) -> datetime | None:
    """Return when the token blackout ends if `now` is inside it (03:30-08:00 IST), else None."""
    local = now.astimezone(IST)
    if TOKEN_EXPIRY_IST <= local.time() < BLACKOUT_END_IST:
        return datetime.combine(local.date(), BLACKOUT_END_IST, IST).astimezone(UTC)
    return None


def is_token_request_allowed(now: datetime) -> bool:
    return upstox_blackout_end(now) is None


def upstox_authorization_url(authorize_url: str, *, client_id: str, redirect_uri: str, state: str | None) -> str:
    """Return the login dialog URL; without `state` it is the prompt's coalescing key."""
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri}
    if state is not None:
        params["state"] = state
    return f"{authorize_url}?{urlencode(params)}"


# ---- error classification (pure) --------------------------------------------------------


class BrokerErrorKind(StrEnum):
    INVALID_TOKEN = "invalid_token"  # the token is dead: ask the user to log in again
    NON_RECOVERABLE = "non_recoverable"  # the app's credentials are wrong: stop, tell the operator
    CODE_REJECTED = "code_rejected"  # this auth code is bad or spent: get a new one
    RATE_LIMITED = "rate_limited"
    TRANSIENT = "transient"


@dataclass(frozen=True, slots=True)
class BrokerError:
    kind: BrokerErrorKind
    status: int
    error_code: str = ""  # e.g. UDAPI100050
    message: str = ""

    def describe(self) -> str:
        code = f" {self.error_code}" if self.error_code else ""
        message = f": {self.message}" if self.message else ""
        return f"HTTP {self.status}{code}{message}"


def _first_error(body: bytes) -> tuple[str, str]:
    try:
        envelope: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return "", ""
    errors = envelope.get("errors") if isinstance(envelope, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        first = errors[0]
        code = first.get("errorCode") or first.get("error_code") or ""
        return str(code), str(first.get("message") or "")[:300]
    return "", ""


def classify_upstox_error(status: int, body: bytes, *, during_code_exchange: bool = False) -> BrokerError:
    """Classify an Upstox error response by its errorCode first, then its HTTP status."""
    code, message = _first_error(body)
    if code in NON_RECOVERABLE_CODES:
        kind = BrokerErrorKind.NON_RECOVERABLE
    elif code == INVALID_TOKEN_CODE:
        kind = BrokerErrorKind.INVALID_TOKEN
    elif code == RATE_LIMIT_CODE or status == 429:
        kind = BrokerErrorKind.RATE_LIMITED
    elif code == UNEXPECTED_CODE or status >= 500:
        kind = BrokerErrorKind.TRANSIENT
    elif during_code_exchange:
        # Anything else the token endpoint refuses is about the code: it is spent now.
        kind = BrokerErrorKind.CODE_REJECTED
    elif status == 401:
        kind = BrokerErrorKind.INVALID_TOKEN
    else:
        kind = BrokerErrorKind.TRANSIENT
    return BrokerError(kind, status, code, message)


# ---- the exchange ----------------------------------------------------------------------


@dataclass(frozen=True)
class TokenGrant:
    access_token: AccessToken
    issued_at: datetime
    expires_at: datetime
    broker_user_id: str = ""


def parse_upstox_token_response(body: bytes) -> tuple[str, str]:
    """Return (access_token, user_id) from a Get Token response; ValueError if absent."""
    payload: Any = json.loads(body)
    if isinstance(payload, dict) and isinstance(payload.get("data"), dict):
        payload = payload["data"]  # tolerate the {"status","data"} envelope
    if not isinstance(payload, dict) or not isinstance(payload.get("access_token"), str) or not payload["access_token"]:
        raise ValueError("token response has no access_token")
    return payload["access_token"], str(payload.get("user_id") or "")


@dataclass(frozen=True)
class UpstoxApp:
    """One registered Upstox app: the credentials the token exchange presents."""

    broker: str
    client_id: str
    client_secret: str
    redirect_uri: str
    authorize_url: str = AUTHORIZE_URL
    token_url: str = TOKEN_URL
    timeout_s: float = 10.0


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    # Built once: loading the CA bundle costs ~0.1 s, paid per client otherwise.
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


class UpstoxTokenExchange:
    """Authorization URL, blackout, expiry and the code-for-token exchange for one Upstox app."""

    def __init__(self, app: UpstoxApp, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.app = app
        self.broker = app.broker
        self._transport = transport

    @property
    def config_fingerprint(self) -> str:
        """Identity of the credentials: a FAILED state reached with other credentials is retried."""
        a = self.app
        return token_fingerprint("\x00".join([a.client_id, a.client_secret, a.redirect_uri, a.token_url]))

    def authorization_url(self, state: str | None) -> str:
        return upstox_authorization_url(
            self.app.authorize_url, client_id=self.app.client_id, redirect_uri=self.app.redirect_uri, state=state
        )

    def token_expiry(self, issued_at: datetime) -> datetime:
        return upstox_token_expiry(issued_at)

    def blackout_end(self, now: datetime) -> datetime | None:
        return upstox_blackout_end(now)

    def classify(self, status: int, body: bytes) -> BrokerError:
        return classify_upstox_error(status, body)

    async def exchange(self, code: str, *, now: datetime) -> TokenGrant:
        """Trade an authorization code for a token.

        Raises TokenBlackout, AuthCodeRejected, NonRecoverableTokenError or
        TokenExchangeUnavailable; never retries, because the code is single-use.
        """
        blackout_end = self.blackout_end(now)
        if blackout_end is not None:
            raise TokenBlackout(
                f"Upstox issues no tokens between 03:30 and 08:00 IST; "
                f"submit a new code after {blackout_end.astimezone(IST):%H:%M} IST"
            )
        form = {
            "code": code,
            "client_id": self.app.client_id,
            "client_secret": self.app.client_secret,
            "redirect_uri": self.app.redirect_uri,
            "grant_type": "authorization_code",
        }
        try:
            async with httpx.AsyncClient(
                timeout=self.app.timeout_s, transport=self._transport, verify=_tls_context()
            ) as client:
                response = await client.post(self.app.token_url, data=form, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise TokenExchangeUnavailable(
                f"Upstox token endpoint unreachable ({exc.__class__.__name__}); the code may be spent: log in again"
            ) from None
        if response.status_code != 200:
            error = classify_upstox_error(response.status_code, response.content, during_code_exchange=True)
            if error.kind is BrokerErrorKind.NON_RECOVERABLE:
                raise NonRecoverableTokenError(
                    f"Upstox rejected the app credentials ({error.describe()}): check UPSTOX_CLIENT_ID, "
                    "UPSTOX_CLIENT_SECRET and UPSTOX_REDIRECT_URI, then restart",
                    error_code=error.error_code,
                )
            if error.kind is BrokerErrorKind.CODE_REJECTED:
                raise AuthCodeRejected(
                    f"Upstox rejected the authorization code ({error.describe()}). "
                    "A code works once: log in again to get a new one"
                )
            raise TokenExchangeUnavailable(f"Upstox token endpoint failed ({error.describe()}); try again shortly")
        try:
            secret, user_id = parse_upstox_token_response(response.content)
        except ValueError:
            raise TokenExchangeUnavailable("Upstox token response had no access token") from None
        register_secret(secret)
        token = AccessToken(secret)
        return TokenGrant(token, issued_at=now, expires_at=self.token_expiry(now), broker_user_id=user_id)
