"""The auth-code entry points: the paste-the-code form and the OAuth redirect endpoint.

Both require a login (LoginRequiredMiddleware), act only on an open prompt the user may
see, count against the per-user rate limit, and never put a token in a response.
"""

from __future__ import annotations

import re
from typing import Any

from channels.db import database_sync_to_async
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from recovery.brokers import UnknownBroker
from recovery.clock import current_clock
from recovery.prompts import prompt_payload
from recovery.ratelimit import code_attempt_allowed
from recovery.recover import PromptNotOpen, prompt_recover
from recovery.selectors import prompt_for_user, prompts_open_for_user
from recovery.tokens import (
    AuthCodeRejected,
    NonRecoverableTokenError,
    TokenBlackout,
    TokenError,
    TokenExchangeUnavailable,
)

RATE_LIMITED = "Too many code attempts: wait a few minutes, then log in at the broker again."
BAD_CODE = "That is not an authorization code: paste the value after code= from the address bar."
# Broker codes are short printable ASCII; anything else (NUL, control or non-ASCII
# characters) is refused before it reaches the broker, the prompt or a log line.
_CODE_CHARS = re.compile(r"[\x21-\x7e]*")
BROKER_REMOVED = (
    "This broker is no longer configured on the site, so no login can complete. "
    "Ask an administrator to configure it again (or to remove the prompt)."
)


def _status_for(error: TokenError) -> int:
    if isinstance(error, PromptNotOpen):
        return 404
    if isinstance(error, (TokenBlackout, NonRecoverableTokenError)):
        return 409
    if isinstance(error, TokenExchangeUnavailable):
        return 502
    if isinstance(error, AuthCodeRejected):
        return 400
    return 400


async def _user(request: HttpRequest) -> Any:
    """The logged-in user, also set as request.user so templates never query from the event loop."""
    user = await request.auser()
    request.user = user
    return user


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _open_prompts(user: Any) -> list[dict[str, Any]]:
    return [prompt_payload(p) for p in prompts_open_for_user(user)]


@require_GET
@never_cache
async def prompts_json(request: HttpRequest) -> JsonResponse:
    """The user's open prompts (the dashboard re-syncs with this after a reconnect)."""
    user = await _user(request)
    return JsonResponse({"prompts": await database_sync_to_async(_open_prompts)(user)})


async def _render_prompt(
    request: HttpRequest, recovery_token: str, *, error: str = "", status: int = 200
) -> HttpResponse:
    user = await _user(request)
    prompt = await database_sync_to_async(prompt_for_user)(user=user, recovery_token=recovery_token)
    context = {"prompt": prompt_payload(prompt) if prompt else None, "error": error}
    return render(request, "recovery/prompt_detail.html", context, status=status if prompt else 404)


@require_GET
@never_cache
async def prompt_detail(request: HttpRequest, recovery_token: str) -> HttpResponse:
    """One prompt with its login link and code form (works without JavaScript)."""
    return await _render_prompt(request, recovery_token)


async def _recover(request: HttpRequest, recovery_token: str, code: str) -> tuple[int, str]:
    user = await _user(request)
    if not await code_attempt_allowed(user.pk):
        return 429, RATE_LIMITED
    if _CODE_CHARS.fullmatch(code.strip()) is None:
        return 400, BAD_CODE
    try:
        prompt = await prompt_recover(user=user, recovery_token=recovery_token, code=code, now=current_clock().now())
    except TokenError as exc:
        return _status_for(exc), str(exc)
    except UnknownBroker:
        # The prompt outlived its broker's configuration: a conflict with the site's state.
        return 409, BROKER_REMOVED
    return 200, f"{prompt.broker.capitalize()} login complete: the token is valid."


@require_POST
@never_cache
async def submit_code(request: HttpRequest, recovery_token: str) -> HttpResponse:
    """The paste-the-code form (CSRF-checked by the middleware)."""
    status, message = await _recover(request, recovery_token, request.POST.get("code", ""))
    if _wants_json(request):
        return JsonResponse({"ok": status == 200, "message": message}, status=status)
    if status == 200:
        messages.success(request, message)  # shown on the dashboard it returns to
        return redirect("dashboard")
    return await _render_prompt(request, recovery_token, error=message, status=status)


@require_GET
@never_cache
async def oauth_callback(request: HttpRequest, broker: str) -> HttpResponse:
    """The broker's redirect after login: ?code=...&state=<recovery token of the prompt>.

    `state` must name an open prompt of this broker that the logged-in user may see,
    which is what makes this GET safe against login CSRF.
    """
    user = await _user(request)
    state = request.GET.get("state", "")
    code = request.GET.get("code", "")
    prompt = await database_sync_to_async(prompt_for_user)(user=user, recovery_token=state)
    if prompt is None or prompt.broker != broker:
        context = {
            "ok": False,
            "message": "This login does not match an open prompt of yours (state mismatch). "
            "Start the login again from the dashboard.",
        }
        return render(request, "recovery/callback_result.html", context, status=400)
    if not code:
        message = request.GET.get("error_description") or request.GET.get("error") or "The broker sent no code."
        return render(request, "recovery/callback_result.html", {"ok": False, "message": message[:300]}, status=400)
    status, message = await _recover(request, state, code)
    return render(request, "recovery/callback_result.html", {"ok": status == 200, "message": message}, status=status)
