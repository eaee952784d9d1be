"""/api/backtest-sweeps/: the caller's parameter sweeps (a superuser's: every sweep) with their ranked points; POST starts one.

A POST is validated by the same form as the page (backtesting.forms.BacktestSweepForm),
so the API and the browser refuse the same input with the same messages.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from api.backtests import BacktestRunRequestSerializer, bound_form, refusal
from backtesting.forms import BacktestSweepForm
from backtesting.models import BacktestSweep
from backtesting.selectors import sweeps_for_user
from backtesting.sweep_services import backtest_sweep_create

_FIELDS = (
    "id",
    "kind",
    "params",
    "grid",
    "trials",
    "seed",
    "metric",
    "workers",
    "feed",
    "symbols",
    "start_ns",
    "end_ns",
    "capital",
    "quantity",
    "lot_size",
    "tick_size",
    "order_type",
    "reversal",
    "taker_bps",
    "maker_bps",
    "latency_ms",
    "status",
    "progress",
    "points_done",
    "points_total",
    "ticks",
    "error",
    "created_at",
    "started_at",
    "finished_at",
)


class BacktestSweepSerializer(serializers.ModelSerializer):
    """A sweep with its best point (the whole ranked table on the detail route)."""

    progress = serializers.FloatField(read_only=True)
    best = serializers.SerializerMethodField()

    class Meta:
        model = BacktestSweep
        fields: tuple[str, ...] = (*_FIELDS, "best")
        read_only_fields: tuple[str, ...] = fields

    def get_best(self, sweep: BacktestSweep) -> dict[str, Any] | None:
        return sweep.results[0] if sweep.results else None


class BacktestSweepDetailSerializer(BacktestSweepSerializer):
    class Meta(BacktestSweepSerializer.Meta):
        fields = (*_FIELDS, "best", "results")
        read_only_fields = fields


class BacktestSweepRequestSerializer(BacktestRunRequestSerializer):
    """What a POST carries: a run's request (params: the fixed ones), the grid, the metric and the processes."""

    grid = serializers.DictField(child=serializers.JSONField())
    trials = serializers.IntegerField(required=False, allow_null=True)
    seed = serializers.IntegerField(required=False)
    metric = serializers.CharField(required=False)
    workers = serializers.IntegerField(required=False)


class BacktestSweepViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Your parameter sweeps, newest first; the detail route carries every point, best first."""

    def get_queryset(self) -> QuerySet[Any]:
        return sweeps_for_user(self.request.user)

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action == "retrieve":
            return BacktestSweepDetailSerializer
        if self.action == "create":
            return BacktestSweepRequestSerializer
        return BacktestSweepSerializer

    @extend_schema(request=BacktestSweepRequestSerializer, responses={201: BacktestSweepSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Start a sweep over recorded ticks; a bad value is a 400 naming its field."""
        form = bound_form(BacktestSweepForm, request.data)
        if form is None or not form.is_valid():
            return refusal(form)
        sweep = backtest_sweep_create(owner=request.user, request=form.sweep_request())
        return Response(BacktestSweepSerializer(sweep).data, status=status.HTTP_201_CREATED)
