"""/healthz and /readyz, served before the session and auth middleware.

The session, auth and CSRF middleware read the database for a logged-in caller; with
the database down they would turn the probe into a 500. ProbeMiddleware answers both
probes first, so /readyz is 200 or 503, never 500. Anonymous callers get status names
only; a staff session (resolved here, and only if the database answers) also gets the
reasons and this process's identity.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from importlib import import_module
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib import auth
from django.http import HttpRequest, HttpResponse

from core.health import Status
from core.readiness import Check, process_checks

log = logging.getLogger(__name__)

PROBE_METHODS = ("GET", "HEAD")


def healthz_response() -> HttpResponse:
    return _plain(HttpResponse("ok\n", content_type="text/plain"))


def _plain(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "max-age=0, no-cache, no-store, must-revalidate, private"
    return response


def caller_is_staff(request: HttpRequest) -> bool:
    """Whether the request carries an active staff session; False whenever that cannot be known."""
    if not request.COOKIES.get(settings.SESSION_COOKIE_NAME):
        return False
    try:
        engine = import_module(settings.SESSION_ENGINE)
        request.session = engine.SessionStore(request.COOKIES[settings.SESSION_COOKIE_NAME])
        user = auth.get_user(request)
        return bool(user.is_active and user.is_staff)
    except Exception:  # a session store that fails is an anonymous caller, not a 500
        log.debug("readyz: could not resolve the caller's session", exc_info=True)
        return False


def readiness_response(request: HttpRequest) -> HttpResponse:
    """200 when every check of this process passes, 503 otherwise; details for staff only."""
    checks = process_checks(timeout_s=settings.READYZ_TIMEOUT_S)
    ok = all(c.status.allows_readiness for c in checks)
    database_ok = checks[0].status is not Status.BLOCKED
    detailed = database_ok and caller_is_staff(request)
    lines = ["ready" if ok else "not ready", *(_line(c, detailed) for c in checks)]
    if detailed:
        lines.append(f"process: {socket.gethostname()}:{os.getpid()}")
        lines.append("site-wide (every feed, job and process): /internal/health")
    return _plain(HttpResponse("\n".join(lines) + "\n", status=200 if ok else 503, content_type="text/plain"))


def _line(check: Check, detailed: bool) -> str:
    return f"{check.name}: {check.status} {check.reason}" if detailed else f"{check.name}: {check.status}"


def _probe(request: HttpRequest) -> HttpResponse | None:
    """The probe's response, or None for any other request."""
    if request.method in PROBE_METHODS:
        if request.path_info == "/readyz":
            return readiness_response(request)
        if request.path_info == "/healthz":
            return healthz_response()
    return None


def _is_probe(request: HttpRequest) -> bool:
    return request.method in PROBE_METHODS and request.path_info in ("/readyz", "/healthz")


class ProbeMiddleware:
    """Serve the probes ahead of every middleware that may touch the database.

    Sync and async capable, so it never forces the rest of the chain under ASGI onto
    a thread; under ASGI a probe itself runs in a thread (its checks are synchronous).
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return _probe(request) or self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        if _is_probe(request):
            response = await sync_to_async(_probe)(request)
            if response is not None:
                return response
        return await self.get_response(request)
