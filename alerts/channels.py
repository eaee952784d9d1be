"""Notification URLs: which apprise schemes the site accepts, how they are kept and shown.

A URL holds the channel's secret (a bot token, a password, a webhook path), so it is
stored encrypted with the broker-token keys and shown only as its masked scheme and host.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import apprise

from recovery.encryption import decrypt_token, encrypt_token

# Webhook (JSON or form POST, plain or TLS), Telegram, email.
ALLOWED_SCHEMES = frozenset({"json", "jsons", "form", "forms", "tgram", "mailto", "mailtos"})
MAX_URL_LENGTH = 2000


class ChannelUrlRefused(ValueError):
    """The notification URL cannot be used; the message says why, without the URL."""


def channel_url_check(url: str) -> str:
    """Return the URL's masked form for display, or raise ChannelUrlRefused."""
    url = url.strip()
    if not url:
        raise ChannelUrlRefused("enter a notification URL")
    if len(url) > MAX_URL_LENGTH:
        raise ChannelUrlRefused(f"a notification URL has at most {MAX_URL_LENGTH} characters")
    scheme = url.partition("://")[0].lower()
    if scheme not in ALLOWED_SCHEMES:
        allowed = ", ".join(f"{s}://" for s in sorted(ALLOWED_SCHEMES))
        raise ChannelUrlRefused(f"the scheme must be one of {allowed}")
    try:
        plugin = apprise.Apprise.instantiate(url)
    except Exception:  # apprise's URL parsers are not ours: any failure is a refusal
        plugin = None
    if plugin is None:
        raise ChannelUrlRefused(f"apprise cannot use this {scheme}:// URL (check its host, token or address)")
    return channel_url_masked(str(plugin.url(privacy=True)))  # type: ignore[no-untyped-call]  # apprise ships no types here


def channel_url_masked(private_url: str) -> str:
    """Scheme and (masked) host only: a path or query may hold a webhook secret or a header."""
    parts = urlsplit(private_url)
    rest = "/…" if parts.path.strip("/") or parts.query else ""
    return f"{parts.scheme}://{parts.netloc}{rest}"


def channel_url_encrypt(url: str) -> str:
    return encrypt_token(url.strip())


def channel_url_decrypt(ciphertext: str) -> str:
    return decrypt_token(ciphertext)
