"""/api/trades/ (closed trades, paged and filtered) and /api/performance/ (their figures).

Both read the caller's trades only and take the same filters as the trades page
(dashboard.trade_filters.TradeFilter): a bad value is a 400 naming the parameter.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from api.trade_serializers import PerformanceSerializer, TradeSerializer
from dashboard.performance import report_for, report_json
from dashboard.trade_filters import TradeFilter
from dashboard.trades import closed_trades_for_user


class TradeViewSet(viewsets.ReadOnlyModelViewSet):
    """Closed trades on your accounts, newest exit first: entry and exit time and price, fees, P&L."""

    serializer_class = TradeSerializer
    filterset_class = TradeFilter

    def get_queryset(self) -> QuerySet[Any]:
        return closed_trades_for_user(self.request.user)


_FILTERS = [
    OpenApiParameter(name, str, description=filter_.extra.get("help_text", ""))
    for name, filter_ in TradeFilter.base_filters.items()
]


class PerformanceViewSet(viewsets.ViewSet):
    """The figures of your closed trades (the same filters as /api/trades/)."""

    @extend_schema(operation_id="performance_list", parameters=_FILTERS, responses=PerformanceSerializer)
    def list(self, request: Request, format: str | None = None) -> Response:
        filtered = TradeFilter(request.query_params, queryset=closed_trades_for_user(request.user), request=request)
        if not filtered.is_valid():
            raise ValidationError(filtered.errors)
        return Response(report_json(report_for(filtered)))
