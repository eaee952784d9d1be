"""Backtest pages: start a run, watch it, read its report, compare two runs. Each user sees only their runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from backtesting.forms import BacktestRunForm, run_form_initial
from backtesting.models import BacktestRun
from backtesting.push import run_state
from backtesting.selectors import run_candles, runs_for_user, sweeps_for_user
from backtesting.services import backtest_run_create

RUNS_PER_PAGE = 20
RECENT_SWEEPS = 10


def _run(request: HttpRequest, pk: int) -> BacktestRun:
    # Another user's run is a 404, the same as one that does not exist.
    return get_object_or_404(runs_for_user(request.user), pk=pk)


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    paginator = Paginator(runs_for_user(request.user), RUNS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    sweeps = sweeps_for_user(request.user)[:RECENT_SWEEPS]
    return render(request, "backtesting/run_list.html", {"page": page, "sweeps": sweeps})


@require_http_methods(["GET", "POST"])
def run_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = BacktestRunForm(request.POST)
        if form.is_valid():
            run = backtest_run_create(owner=request.user, request=form.run_request())
            return redirect("backtest-run", pk=run.pk)
        status = 400
    elif "from" in request.GET:  # "Run again": the form filled in with one of your runs
        form = BacktestRunForm(initial=run_form_initial(_run(request, _run_id(request, "from"))))
        status = 200
    else:
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        form = BacktestRunForm(
            initial={
                "start": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
                "end": now.strftime("%Y-%m-%dT%H:%M"),
            }
        )
        status = 200
    return render(request, "backtesting/run_new.html", {"form": form}, status=status)


def _chart_context(run: BacktestRun) -> dict[str, Any]:
    report = run.report or {}
    trades = report.get("closed_trades", [])
    symbol = trades[0]["instrument"] if trades else (run.symbols[0] if run.symbols else "")
    return {
        "equity": [[at, equity] for at, equity in report.get("equity_curve", [])],
        "candles": run_candles(run, symbol) if run.report is not None and symbol else [],
        "trades": [trade for trade in trades if trade["instrument"] == symbol],
        "symbol": symbol,
    }


@require_GET
@never_cache
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run(request, pk)
    report = run.report or {}
    kept = len(report.get("risk_events", ()))
    context = {
        "run": run,
        "report": run.report,
        "chart": _chart_context(run),
        "state": run_state(run),
        "risk_events_left": max(0, sum(report.get("risk_event_counts", {}).values()) - kept),
    }
    return render(request, "backtesting/run_detail.html", context)


@require_GET
@never_cache
def run_state_json(request: HttpRequest, pk: int) -> JsonResponse:
    """The run's progress, for a page that (re)connects and must not wait for the next push."""
    return JsonResponse(run_state(_run(request, pk)))


def _run_id(request: HttpRequest, name: str) -> int:
    value = request.GET.get(name, "")
    if not value.isdigit() or len(value) > 18:
        raise Http404(f"{name} is missing or not a run id")
    return int(value)


@require_GET
def run_compare(request: HttpRequest) -> HttpResponse:
    left, right = _run(request, _run_id(request, "a")), _run(request, _run_id(request, "b"))
    runs = [
        {
            "run": run,
            "report": run.report or {},
            "equity": [list(point) for point in (run.report or {}).get("equity_curve", [])],
            "data_id": f"equity-data-{n}",
        }
        for n, run in enumerate((left, right), start=1)
    ]
    return render(request, "backtesting/run_compare.html", {"left": runs[0], "right": runs[1], "runs": runs})
