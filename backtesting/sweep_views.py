"""Sweep pages: start a parameter grid, watch its points finish, read the table best first. Each user sees only theirs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from backtesting.forms import BacktestSweepForm
from backtesting.models import BacktestSweep
from backtesting.push import sweep_state
from backtesting.selectors import sweep_rows, sweeps_for_user
from backtesting.sweep_services import backtest_sweep_create


def _sweep(request: HttpRequest, pk: int) -> BacktestSweep:
    # Another user's sweep is a 404, the same as one that does not exist.
    return get_object_or_404(sweeps_for_user(request.user), pk=pk)


@require_http_methods(["GET", "POST"])
def sweep_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = BacktestSweepForm(request.POST)
        if form.is_valid():
            sweep = backtest_sweep_create(owner=request.user, request=form.sweep_request())
            return redirect("backtest-sweep", pk=sweep.pk)
        status = 400
    else:
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        form = BacktestSweepForm(
            initial={
                "start": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
                "end": now.strftime("%Y-%m-%dT%H:%M"),
            }
        )
        status = 200
    return render(request, "backtesting/sweep_new.html", {"form": form}, status=status)


@require_GET
@never_cache
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = _sweep(request, pk)
    context = {"sweep": sweep, "rows": sweep_rows(sweep), "state": sweep_state(sweep)}
    return render(request, "backtesting/sweep_detail.html", context)


@require_GET
@never_cache
def sweep_state_json(request: HttpRequest, pk: int) -> JsonResponse:
    """The sweep's progress, for a page that (re)connects and must not wait for the next push."""
    return JsonResponse(sweep_state(_sweep(request, pk)))
