"""The closed-trade history page, its CSV export and the performance page.

Each reads the user's own trades only (dashboard.trades.closed_trades_for_user) and
narrows them with the one TradeFilter; a filter value that cannot be used answers 400
with the form and its errors on the page (plain text for the CSV).
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.performance import PerformanceReport, report_for
from dashboard.selectors import accounts_for_user, strategies_for_user
from dashboard.times import display_zone
from dashboard.trade_filters import TradeFilter
from dashboard.trades import closed_trades_for_user, trade_rows, trades_csv_lines
from dashboard.views import request_user
from orders.models import Position

TRADES_PER_PAGE = 50
MAX_PAGE = 10**9


def _filtered(request: HttpRequest) -> TradeFilter:
    user = request_user(request)
    return TradeFilter(request.GET, queryset=closed_trades_for_user(user), request=request)


def _page_number(request: HttpRequest) -> int | None:
    raw = request.GET.get("page", "1").strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 10 or not 1 <= int(raw) <= MAX_PAGE:
        return None
    return int(raw)


def _choices(request: HttpRequest) -> dict[str, Any]:
    user = request_user(request)
    return {
        "accounts": list(accounts_for_user(user).values_list("pk", "name")),
        "strategies": list(strategies_for_user(user).order_by("name").values_list("pk", "name")),
        "zone": display_zone(user),
    }


def _query_without_page(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()


def trade_page(trades: QuerySet[Position], number: int) -> tuple[Page[Any], int]:
    """Page `number` of `trades` (past the end: the last) and how many trades there are.

    The page is found on the closed-trade index alone (keys only, no joined rows), then
    only its TRADES_PER_PAGE rows are read with their joins, so a deep page costs about
    what the first does: skipping keys in an index-only scan, never joined rows.
    """
    paginator = Paginator(trades.order_by("-exit_at", "-id").values_list("pk", flat=True), TRADES_PER_PAGE)
    keys = paginator.get_page(number)
    ids = list(keys.object_list)
    by_id = {position.pk: position for position in trades.filter(pk__in=ids)}
    rows: list[Position] = [by_id[pk] for pk in ids if pk in by_id]
    page: Page[Any] = Page(rows, keys.number, paginator)
    return page, paginator.count


@require_GET
def trades_page(request: HttpRequest) -> HttpResponse:
    """Closed trades, newest exit first, TRADES_PER_PAGE a page, filtered by the query string."""
    trades = _filtered(request)
    page_number = _page_number(request)
    context: dict[str, Any] = {"filter": trades, "query": _query_without_page(request), **_choices(request)}
    if not trades.is_valid() or page_number is None:
        context["page_error"] = None if page_number is not None else "page must be a whole number from 1"
        return render(request, "dashboard/trades.html", context, status=400)
    page, total = trade_page(trades.qs, page_number)
    context.update({"page": page, "rows": trade_rows(page.object_list), "total": total})
    return render(request, "dashboard/trades.html", context)


@require_GET
def trades_csv(request: HttpRequest) -> HttpResponseBase:
    """The filtered closed trades as CSV, streamed."""
    trades = _filtered(request)
    if not trades.is_valid():
        problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in trades.errors.items())
        return HttpResponse(f"bad filter: {problems}\n", status=400, content_type="text/plain; charset=utf-8")
    response = StreamingHttpResponse(
        trades_csv_lines(trades.qs, display_zone(request_user(request))), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = 'attachment; filename="trades.csv"'
    return response


@require_GET
def performance_page(request: HttpRequest) -> HttpResponse:
    """P&L by instrument, strategy, account and period, the trade statistics and the equity curve."""
    trades = _filtered(request)
    context: dict[str, Any] = {"filter": trades, "query": request.GET.urlencode(), **_choices(request)}
    if not trades.is_valid():
        return render(request, "dashboard/performance.html", context, status=400)
    report = report_for(trades)
    context.update({"report": report, "curve": equity_svg(report)})
    return render(request, "dashboard/performance.html", context)


CURVE_WIDTH, CURVE_HEIGHT, CURVE_PAD = 720, 200, 8


def equity_svg(report: PerformanceReport) -> dict[str, Any] | None:
    """Polyline points of the daily equity curve, scaled into the SVG box (drawing only: floats are fine)."""
    points = report.equity_curve
    if not points:
        return None
    values = [report.capital, *(point.equity for point in points)]
    low, high = min(values), max(values)
    span = (high - low) or 1
    step = (CURVE_WIDTH - 2 * CURVE_PAD) / max(len(values) - 1, 1)

    def y(value: int) -> float:
        return CURVE_HEIGHT - CURVE_PAD - (value - low) / span * (CURVE_HEIGHT - 2 * CURVE_PAD)

    coordinates = " ".join(f"{CURVE_PAD + n * step:.1f},{y(value):.1f}" for n, value in enumerate(values))
    return {"points": coordinates, "width": CURVE_WIDTH, "height": CURVE_HEIGHT, "baseline": f"{y(report.capital):.1f}"}
