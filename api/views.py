"""The read-only JSON API. Every queryset comes from a user-scoped selector, so another
user's object is simply not there: a 404, the same as one that does not exist."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from api import filters, serializers
from core.health_report import build_report
from core.readiness import database_reachable
from core.selectors import component_health_effective
from dashboard import selectors
from orders.models import TradeSetting
from recovery.selectors import prompts_open_for_user


class AccountViewSet(viewsets.ReadOnlyModelViewSet):
    """Your accounts with their capital ledger (allocated, reserved, realized, available)."""

    serializer_class = serializers.AccountSerializer

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.accounts_with_ledger_for_user(self.request.user)

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        context["halted"] = selectors.entries_halted_by_account(self.request.user)
        return context

    @extend_schema(responses=serializers.LedgerEntrySerializer(many=True))
    @action(detail=True, methods=["get"])
    def journal(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        """The account's ledger journal, newest first: every movement of its capital."""
        account = self.get_object()
        page = self.paginate_queryset(selectors.ledger_entries_for_user(request.user, account_id=account.pk))
        return self.get_paginated_response(serializers.LedgerEntrySerializer(page, many=True).data)


class OrderViewSet(viewsets.ReadOnlyModelViewSet):
    """Orders on your accounts, newest first."""

    serializer_class = serializers.OrderSerializer
    filterset_class = filters.OrderFilter

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.orders_for_user(self.request.user)


class FillViewSet(viewsets.ReadOnlyModelViewSet):
    """Executions on your accounts, newest first."""

    serializer_class = serializers.FillSerializer
    filterset_class = filters.FillFilter

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.fills_for_user(self.request.user)


class PositionViewSet(viewsets.ReadOnlyModelViewSet):
    """Positions on your accounts with realized and (open ones) unrealized P&L at the last recorded tick."""

    serializer_class = serializers.PositionSerializer
    filterset_class = filters.PositionFilter

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.positions_for_user(self.request.user)


class SignalViewSet(viewsets.ReadOnlyModelViewSet):
    """Signals of the strategies that trade on your accounts, newest first, each with its outcome per account."""

    serializer_class = serializers.SignalSerializer
    filterset_class = filters.SignalFilter

    def get_queryset(self) -> QuerySet[Any]:
        return selectors.signals_for_user(self.request.user)

    # Outcomes are attached to the page (or the one signal) in a single query: no query per signal.
    def paginate_queryset(self, queryset: QuerySet[Any] | Sequence[Any]) -> list[Any] | None:
        page = super().paginate_queryset(queryset)
        return None if page is None else selectors.signal_outcomes_attach(self.request.user, page)

    def get_object(self) -> Any:
        (signal,) = selectors.signal_outcomes_attach(self.request.user, [super().get_object()])
        return signal


class StrategyViewSet(viewsets.ReadOnlyModelViewSet):
    """Strategies trading on your accounts, with your trade settings for each."""

    serializer_class = serializers.StrategySerializer

    def get_queryset(self) -> QuerySet[Any]:
        mine = TradeSetting.objects.filter(account__owner_id=self.request.user.pk).select_related("account")
        return selectors.strategies_for_user(self.request.user).prefetch_related(
            "instruments__feed", Prefetch("trade_settings", queryset=mine)
        )


class PromptViewSet(viewsets.ReadOnlyModelViewSet):
    """Open broker login prompts addressed to you (never a token)."""

    serializer_class = serializers.PromptSerializer

    def get_queryset(self) -> QuerySet[Any]:
        return prompts_open_for_user(self.request.user)


class HealthViewSet(viewsets.ViewSet):
    """Staff only: the /internal/health document; a detail route per component."""

    permission_classes = [permissions.IsAdminUser]
    lookup_value_regex = ".+"  # component names hold ":" and "/" ("feed:sim/trades")

    @extend_schema(operation_id="health_list", responses={200: dict})
    def list(self, request: Request, format: str | None = None) -> Response:
        db_ok, db_reason = database_reachable()
        components = component_health_effective() if db_ok else []
        return Response(build_report(database_ok=db_ok, database_reason=db_reason, components=components))

    @extend_schema(operation_id="health_retrieve", responses={200: dict})
    def retrieve(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        for view in component_health_effective():
            if view.component == pk:
                return Response(
                    {
                        "component": view.component,
                        "status": view.status.value,
                        "reason": view.reason,
                        "process": view.process,
                        "updated_at": view.updated_at.isoformat(),
                        "age_s": round(view.age_s, 3),
                    }
                )
        raise Http404(f"no component {pk!r}")
