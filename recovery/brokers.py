"""The OAuth brokers this site can log in to, built from settings.

Upstox is configured by UPSTOX_CLIENT_ID / UPSTOX_CLIENT_SECRET / UPSTOX_REDIRECT_URI;
without a client id it is simply absent. A TokenExchange is the per-broker strategy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Protocol

from django.conf import settings

from recovery.upstox import BrokerError, TokenGrant, UpstoxApp, UpstoxTokenExchange


class TokenExchange(Protocol):
    broker: str

    @property
    def config_fingerprint(self) -> str: ...

    def authorization_url(self, state: str | None) -> str:
        """The broker's login link; with state=None it names the prompt (coalescing key)."""

    def token_expiry(self, issued_at: datetime) -> datetime: ...

    def blackout_end(self, now: datetime) -> datetime | None: ...

    def classify(self, status: int, body: bytes) -> BrokerError: ...

    async def exchange(self, code: str, *, now: datetime) -> TokenGrant: ...


class UnknownBroker(LookupError):
    pass


def exchanges_from_settings() -> list[TokenExchange]:
    exchanges: list[TokenExchange] = []
    client_id = getattr(settings, "UPSTOX_CLIENT_ID", "")
    if client_id:
        exchanges.append(
            UpstoxTokenExchange(
                UpstoxApp(
                    broker="upstox",
                    client_id=client_id,
                    client_secret=settings.UPSTOX_CLIENT_SECRET,
                    redirect_uri=settings.UPSTOX_REDIRECT_URI,
                    authorize_url=settings.UPSTOX_AUTHORIZE_URL,
                    token_url=settings.UPSTOX_TOKEN_URL,
                    timeout_s=settings.UPSTOX_TOKEN_TIMEOUT_S,
                )
            )
        )
    return exchanges


_override: list[TokenExchange] | None = None


def oauth_exchanges() -> list[TokenExchange]:
    """Return every configured OAuth broker's exchange (read from settings on each call)."""
    return list(_override) if _override is not None else exchanges_from_settings()


def get_exchange(broker: str) -> TokenExchange:
    for exchange in oauth_exchanges():
        if exchange.broker == broker:
            return exchange
    raise UnknownBroker(f"no OAuth broker {broker!r} is configured")


@contextlib.contextmanager
def use_exchanges(exchanges: Sequence[TokenExchange]) -> Iterator[None]:
    """Replace the configured brokers (tests, and one-off scripts against a fake)."""
    global _override
    previous, _override = _override, list(exchanges)
    try:
        yield
    finally:
        _override = previous
