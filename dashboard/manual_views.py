"""The manual control endpoints of the dashboard (POST, confirmed, with a reason; CSRF and login by the middleware)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_POST

from dashboard import manual_control
from dashboard.manual_control import ManualRefused, ManualReport
from dashboard.views import _answer, request_user
from orders.manual import parse_quantity


class ManualEntryForm(forms.Form):
    trade_setting = forms.IntegerField(min_value=1, max_value=2**62)
    instrument = forms.IntegerField(min_value=1, max_value=2**62)
    side = forms.ChoiceField(choices=[("LONG", "Long"), ("SHORT", "Short")])
    quantity = forms.CharField(required=False, max_length=40)
    reason = forms.CharField(max_length=manual_control.MAX_REASON)

    def clean_quantity(self) -> Any:
        try:
            return parse_quantity(self.cleaned_data.get("quantity", ""))
        except ManualRefused as exc:
            raise forms.ValidationError(str(exc)) from None


def _report_answer(request: HttpRequest, report: ManualReport) -> HttpResponse:
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse(report.as_dict())
    return _answer(request, report.ok, report.message())


def _manual(run: Callable[..., ManualReport]) -> Callable[..., HttpResponse]:
    """Shared shape: POST, explicit confirmation, a reason, the object's id from the URL."""

    @require_POST
    def view(request: HttpRequest, pk: int) -> HttpResponse:
        if request.POST.get("confirm") != "yes":
            return _answer(request, False, "nothing done: the action was not confirmed", status=400)
        try:
            report = run(actor=request_user(request), pk=pk, reason=request.POST.get("reason", ""))
        except ManualRefused as exc:
            return _answer(request, False, f"nothing done: {exc}", status=400)
        except ObjectDoesNotExist:
            return _answer(request, False, "no such object", status=404)
        return _report_answer(request, report)

    return view


position_close = _manual(
    lambda *, actor, pk, reason: manual_control.manual_position_close(actor=actor, position_id=pk, reason=reason)
)
order_cancel = _manual(
    lambda *, actor, pk, reason: manual_control.manual_order_cancel(actor=actor, order_id=pk, reason=reason)
)
account_flatten = _manual(
    lambda *, actor, pk, reason: manual_control.manual_account_flatten(actor=actor, account_id=pk, reason=reason)
)


@require_POST
def entry(request: HttpRequest) -> HttpResponse:
    if request.POST.get("confirm") != "yes":
        return _answer(request, False, "nothing done: the entry was not confirmed", status=400)
    data = request.POST.copy()
    # The dashboard's form sends "<trade setting>:<instrument>" as one choice; the API sends both fields.
    setting, _, instrument = data.get("choice", "").partition(":")
    if setting and instrument:
        data["trade_setting"], data["instrument"] = setting, instrument
    form = ManualEntryForm(data)
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(str(e) for e in errors)}" for field, errors in form.errors.items())
        return _answer(request, False, f"nothing done: {problems}", status=400)
    cleaned = form.cleaned_data
    try:
        report = manual_control.manual_entry(
            actor=request_user(request),
            trade_setting_id=cleaned["trade_setting"],
            instrument_id=cleaned["instrument"],
            side=cleaned["side"],
            quantity=cleaned["quantity"],
            reason=cleaned["reason"],
        )
    except ManualRefused as exc:
        return _answer(request, False, f"nothing done: {exc}", status=400)
    except ObjectDoesNotExist:
        return _answer(request, False, "no such trade setting", status=404)
    return _report_answer(request, report)
