"""/api/backtests/: the caller's backtest runs (a superuser's: every run), with reports; POST starts one.

A POST is validated by the same form as the page (backtesting.forms), so the API and
the browser refuse the same input with the same messages: a 400 naming each field.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import QuerySet
from django.forms import Form
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from backtesting.forms import BacktestRunForm
from backtesting.models import BacktestRun
from backtesting.selectors import runs_for_user
from backtesting.services import backtest_run_create

_FIELDS = (
    "id",
    "kind",
    "params",
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
    "ticks_done",
    "ticks_total",
    "signals",
    "error",
    "created_at",
    "started_at",
    "finished_at",
)


class BacktestRunSerializer(serializers.ModelSerializer):
    """A run with the headline figures of its report (the whole report on the detail route)."""

    progress = serializers.FloatField(read_only=True)
    summary = serializers.SerializerMethodField()

    class Meta:
        model = BacktestRun
        fields: tuple[str, ...] = (*_FIELDS, "summary")
        read_only_fields: tuple[str, ...] = fields

    def get_summary(self, run: BacktestRun) -> dict[str, Any] | None:
        if run.report is None:
            return None
        keys = ("trades", "pnl", "pnl_pct", "fees", "win_rate", "final_equity", "sharpe")
        return {key: run.report.get(key) for key in keys}


class BacktestRunDetailSerializer(BacktestRunSerializer):
    class Meta(BacktestRunSerializer.Meta):
        fields = (*_FIELDS, "summary", "report")
        read_only_fields = fields


class BacktestRunRequestSerializer(serializers.Serializer):
    """What a POST carries; validated by the page's form."""

    kind = serializers.CharField()
    params = serializers.DictField(required=False)
    instruments = serializers.ListField(child=serializers.IntegerField(), help_text="instrument ids, one feed")
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    capital = serializers.DecimalField(max_digits=30, decimal_places=12)
    quantity = serializers.DecimalField(max_digits=30, decimal_places=12)
    order_type = serializers.CharField(required=False)
    reversal = serializers.CharField(required=False)
    taker_bps = serializers.IntegerField(required=False)
    maker_bps = serializers.IntegerField(required=False)
    latency_ms = serializers.IntegerField(required=False)


FormT = TypeVar("FormT", bound=Form)


def bound_form(form_class: type[FormT], payload: Any) -> FormT | None:
    """The page's form bound to a POST's JSON object (the form's defaults for what it leaves out); None if not an object."""
    if not isinstance(payload, dict):
        return None
    blank = form_class()
    data: dict[str, Any] = {name: field.initial for name, field in blank.fields.items() if field.initial is not None}
    data.update({name: value for name, value in payload.items() if name in blank.fields})
    return form_class(data)


def refusal(form: Form | None) -> Response:
    """The 400 for a POST that is not a JSON object, or whose form is invalid: each bad field named."""
    if form is None:
        return Response({"detail": "send a JSON object"}, status=status.HTTP_400_BAD_REQUEST)
    errors = {name: [error["message"] for error in found] for name, found in form.errors.get_json_data().items()}
    return Response(errors, status=status.HTTP_400_BAD_REQUEST)


class BacktestRunViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Your backtest runs, newest first; the detail route carries the whole report."""

    def get_queryset(self) -> QuerySet[Any]:
        return runs_for_user(self.request.user)

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        if self.action == "retrieve":
            return BacktestRunDetailSerializer
        if self.action == "create":
            return BacktestRunRequestSerializer
        return BacktestRunSerializer

    @extend_schema(request=BacktestRunRequestSerializer, responses={201: BacktestRunSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Start a run over recorded ticks; a bad value is a 400 naming its field."""
        form = bound_form(BacktestRunForm, request.data)
        if form is None or not form.is_valid():
            return refusal(form)
        run = backtest_run_create(owner=request.user, request=form.run_request())
        return Response(BacktestRunSerializer(run).data, status=status.HTTP_201_CREATED)
