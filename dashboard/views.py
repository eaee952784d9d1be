"""The dashboard page, its panel fragments and the control endpoints (POST, confirmed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from dashboard import services
from dashboard.panels import PANELS, panel_context


def request_user(request: HttpRequest) -> User:
    # LoginRequiredMiddleware admits only logged-in users to every dashboard view.
    return cast(User, request.user)


@require_GET
def dashboard_page(request: HttpRequest) -> HttpResponse:
    context: dict[str, Any] = {}
    for name in PANELS:
        context.update(panel_context(name, request_user(request)))
    return render(request, "dashboard.html", context)


@require_GET
@never_cache
def panel(request: HttpRequest, name: str) -> HttpResponse:
    """One panel, server-rendered, for the browser to swap in after a pushed change."""
    if name not in PANELS:
        raise Http404(f"no panel {name!r}")
    return render(request, f"dashboard/{name}.html", panel_context(name, request_user(request)))


def _answer(request: HttpRequest, ok: bool, message: str, status: int = 200) -> HttpResponse:
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse({"ok": ok, "message": message}, status=status)
    (messages.success if ok else messages.error)(request, message)
    return redirect("dashboard")


def _control(change: Callable[..., str]) -> Callable[..., HttpResponse]:
    """Shared shape of a control: POST, explicit confirmation, a 0/1 value, a reason."""

    @require_POST
    def view(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        if request.POST.get("confirm") != "yes":
            return _answer(request, False, "not changed: the change was not confirmed", status=400)
        value = request.POST.get("enabled", request.POST.get("engaged"))
        if value not in ("0", "1"):
            return _answer(request, False, "not changed: send enabled (or engaged) = 0 or 1", status=400)
        try:
            message = change(request, value == "1", request.POST.get("reason", "").strip(), **kwargs)
        except PermissionDenied as exc:
            return _answer(request, False, str(exc), status=403)
        except (ObjectDoesNotExist, ValueError):
            return _answer(request, False, "no such object", status=404)
        return _answer(request, True, message)

    return view


def _strategy(request: HttpRequest, on: bool, reason: str, *, pk: int) -> str:
    strategy = services.strategy_set_enabled(actor=request_user(request), strategy_id=pk, enabled=on, reason=reason)
    return f"strategy {strategy.name} {'enabled' if on else 'disabled'}"


def _trade_setting(request: HttpRequest, on: bool, reason: str, *, pk: int) -> str:
    setting = services.trade_setting_set_enabled(
        actor=request_user(request), trade_setting_id=pk, enabled=on, reason=reason
    )
    return f"{setting.strategy.name} on {setting.account.name} {'enabled' if on else 'disabled'}"


def _kill_switch(request: HttpRequest, on: bool, reason: str, *, scope: str) -> str:
    account_id = None if scope == "global" else int(scope)
    services.kill_switch_set(actor=request_user(request), account_id=account_id, engaged=on, reason=reason)
    where = "global kill switch" if account_id is None else "account kill switch"
    return f"{where} {'engaged: new entries stopped' if on else 'released: entries allowed'}"


strategy_toggle = _control(_strategy)
trade_setting_toggle = _control(_trade_setting)
kill_switch_toggle = _control(_kill_switch)
