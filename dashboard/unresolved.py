"""The two POST actions of the "Orders needing a decision" panel (CSRF and login by the site's middleware)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from dashboard.decisions import Decision, intent_decide
from dashboard.views import _answer, request_user


def _decide(decision: Decision) -> Any:
    @require_POST
    def view(request: HttpRequest, client_order_id: str) -> HttpResponse:
        if request.POST.get("confirm") != "yes":
            return _answer(request, False, "not changed: the decision was not confirmed", status=400)
        try:
            changed = intent_decide(
                actor=request_user(request),
                client_order_id=client_order_id,
                decision=decision,
                reason=request.POST.get("reason", "").strip(),
            )
        except ObjectDoesNotExist:
            return _answer(request, False, "no such order waiting for a decision", status=404)
        if not changed:
            return _answer(request, False, f"order {client_order_id} was settled meanwhile: nothing changed")
        if decision is Decision.RELEASE:
            return _answer(request, True, f"order {client_order_id}: reservation released")
        return _answer(request, True, f"order {client_order_id}: keeping its reservation and waiting for the broker")

    return view


intent_release = _decide(Decision.RELEASE)
intent_keep_waiting = _decide(Decision.KEEP_WAITING)
