"""The dashboard socket's Origin check: the site's own scheme, host and port, or a trusted origin.

A websocket handshake carries the session cookie whatever page opened it, so a page on
another origin (another port of the same host included) could read a user's stream.
Channels' AllowedHostsOriginValidator compares the host only; this compares the whole
origin the way Django's CSRF check does for a POST: the request's own origin (its scheme,
its Host header, which must be an allowed host) or one of CSRF_TRUSTED_ORIGINS
(`https://*.example.com` matches subdomains). A site that redirects every page to HTTPS
(SECURE_SSL_REDIRECT) serves no page over plain HTTP, so an `http://` origin is refused
there even on its own host and port.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

log = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(text: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin such as `https://example.com:8443`, or None."""
    try:
        parts = urlsplit(text.strip().lower())
        scheme, netloc = parts.scheme, parts.netloc
    except ValueError:
        return None
    if scheme not in _DEFAULT_PORTS or not netloc or "@" in netloc:
        return None
    host, port = split_domain_port(netloc)
    if not host:
        return None
    if not port:
        return scheme, host, _DEFAULT_PORTS[scheme]
    if not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return scheme, host, int(port)


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin1")
    return None


def _own_scheme(scope: dict[str, Any]) -> str:
    if getattr(settings, "SECURE_SSL_REDIRECT", False) or scope.get("scheme") == "wss":
        return "https"
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        header, secure_value = proxy
        name = header.removeprefix("HTTP_").replace("_", "-").lower().encode()
        forwarded = _header(scope, name)
        if forwarded is not None and forwarded.split(",")[0].strip() == secure_value:
            return "https"
    return "http"


def own_origin(scope: dict[str, Any]) -> tuple[str, str, int] | None:
    """The origin a page of this site has when served at the handshake's Host, if that host is allowed."""
    host_header = _header(scope, b"host")
    if not host_header:
        return None
    domain, _ = split_domain_port(host_header.lower())
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # Django's own DEBUG default
    if not domain or not validate_host(domain, allowed):
        return None
    return _origin(f"{_own_scheme(scope)}://{host_header}")


def _trusted(origin: tuple[str, str, int]) -> bool:
    scheme, host, port = origin
    for pattern in settings.CSRF_TRUSTED_ORIGINS:
        wildcard = "://*." in pattern
        trusted = _origin(pattern.replace("://*.", "://", 1))
        if trusted is None or trusted[0] != scheme or trusted[2] != port:
            continue
        if host == trusted[1] or (wildcard and is_same_domain(host, "." + trusted[1])):
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    """True when the handshake's Origin is the site's own or a trusted one."""
    header = _header(scope, b"origin")
    origin = _origin(header) if header else None
    if origin is None:
        return False
    return origin == own_origin(scope) or _trusted(origin)


class SameOriginValidator:
    """ASGI middleware: a websocket handshake from any other origin is refused (HTTP 403)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            log.warning("websocket: refused a handshake from origin %.100r", _header(scope, b"origin"))
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
