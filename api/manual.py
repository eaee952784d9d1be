"""POST /api/manual/...: close a position, cancel an order, flatten an account, enter by hand.

The same services as the dashboard's buttons (dashboard.manual_control): scoped to the
caller's accounts (another user's object is a 404, as a missing one), confirmed
(`"confirm": "yes"`), with a `reason` kept in the audit log. A session-authenticated
call needs the CSRF token (DRF's SessionAuthentication); a token call does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard import manual_control
from dashboard.manual_control import ManualRefused, ManualReport
from orders.manual import parse_quantity


class ManualActionSerializer(serializers.Serializer[Any]):
    confirm = serializers.ChoiceField(choices=["yes"], help_text='"yes": the caller confirms the action.')
    reason = serializers.CharField(max_length=manual_control.MAX_REASON, help_text="Kept in the audit log.")


class ManualEntrySerializer(ManualActionSerializer):
    trade_setting = serializers.IntegerField(min_value=1, max_value=2**62)
    instrument = serializers.IntegerField(min_value=1, max_value=2**62)
    side = serializers.ChoiceField(choices=["LONG", "SHORT"])
    quantity = serializers.CharField(required=False, allow_blank=True, max_length=40)

    def validate_quantity(self, value: str) -> Any:
        try:
            return parse_quantity(value)
        except ManualRefused as exc:
            raise serializers.ValidationError(str(exc)) from None


class ManualOutcomeSerializer(serializers.Serializer[Any]):
    action = serializers.CharField()
    account = serializers.IntegerField()
    target = serializers.CharField()
    outcome = serializers.CharField()
    client_order_id = serializers.CharField()
    detail = serializers.CharField()
    done = serializers.BooleanField()


class ManualReportSerializer(serializers.Serializer[Any]):
    ok = serializers.BooleanField()
    action = serializers.CharField()
    audit_id = serializers.IntegerField()
    message = serializers.CharField()
    outcomes = ManualOutcomeSerializer(many=True)


def _run(
    request: Request, serializer: serializers.Serializer[Any], call: Callable[[dict[str, Any]], ManualReport]
) -> Response:
    serializer.is_valid(raise_exception=True)
    try:
        report = call(dict(serializer.validated_data))
    except ManualRefused as exc:
        return Response({"detail": str(exc)}, status=400)
    except ObjectDoesNotExist:
        return Response({"detail": "Not found."}, status=404)
    return Response(report.as_dict())


class _ManualView(APIView):
    def run_action(self, request: Request, pk: int, data: dict[str, Any]) -> ManualReport:
        raise NotImplementedError

    @extend_schema(request=ManualActionSerializer, responses=ManualReportSerializer)
    def post(self, request: Request, pk: int) -> Response:
        return _run(request, ManualActionSerializer(data=request.data), lambda data: self.run_action(request, pk, data))


class PositionCloseView(_ManualView):
    """Close one of your open positions at market (an exit through the trade executor)."""

    def run_action(self, request: Request, pk: int, data: dict[str, Any]) -> ManualReport:
        return manual_control.manual_position_close(actor=request.user, position_id=pk, reason=data["reason"])  # type: ignore[arg-type]


class OrderCancelView(_ManualView):
    """Cancel one of your working orders at the broker."""

    def run_action(self, request: Request, pk: int, data: dict[str, Any]) -> ManualReport:
        return manual_control.manual_order_cancel(actor=request.user, order_id=pk, reason=data["reason"])  # type: ignore[arg-type]


class AccountFlattenView(_ManualView):
    """Close every open position of your account and cancel its working entries."""

    def run_action(self, request: Request, pk: int, data: dict[str, Any]) -> ManualReport:
        return manual_control.manual_account_flatten(actor=request.user, account_id=pk, reason=data["reason"])  # type: ignore[arg-type]


class ManualEntryView(APIView):
    """Enter at market on one of your trade settings (its quantity unless `quantity` is given)."""

    @extend_schema(request=ManualEntrySerializer, responses=ManualReportSerializer)
    def post(self, request: Request) -> Response:
        return _run(
            request,
            ManualEntrySerializer(data=request.data),
            lambda data: manual_control.manual_entry(
                actor=request.user,  # type: ignore[arg-type]
                trade_setting_id=data["trade_setting"],
                instrument_id=data["instrument"],
                side=data["side"],
                quantity=data.get("quantity"),
                reason=data["reason"],
            ),
        )
