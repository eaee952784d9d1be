"""Read-only representations of what the API lists. Money and prices are decimal strings."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from api.fields import FixedPointField, NanosecondsField
from core.fixed_point import fixed_to_str
from dashboard.pnl import unrealized_pnl
from feeds.market import fixed_from_decimal
from orders.models import Account, Fill, LedgerEntry, Order, Outcome, Position, SignalOutcome
from orders.trade_figures import entry_price, exit_price
from processor.models import Strategy, StrategySignal
from recovery.models import AuthPrompt


class LedgerSerializer(serializers.Serializer):
    allocated_capital = FixedPointField()
    reserved_for_orders = FixedPointField()
    reserved_for_positions = FixedPointField()
    realized_pnl = FixedPointField()
    available = FixedPointField()


class AccountSerializer(serializers.ModelSerializer):
    ledger = serializers.SerializerMethodField()
    entries_halted = serializers.SerializerMethodField()

    class Meta:
        model = Account
        fields = ["id", "name", "broker", "currency", "created_at", "ledger", "entries_halted"]

    @extend_schema_field(LedgerSerializer(allow_null=True))
    def get_ledger(self, account: Account) -> dict[str, Any] | None:
        ledger = getattr(account, "ledger", None)
        return None if ledger is None else LedgerSerializer(ledger).data

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_entries_halted(self, account: Account) -> str | None:
        """Why new entries are stopped on this account (a kill switch), or null."""
        halted: dict[int, str | None] = self.context.get("halted", {})
        return halted.get(account.pk)


class LedgerEntrySerializer(serializers.ModelSerializer):
    delta_allocated = FixedPointField()
    delta_reserved_for_orders = FixedPointField()
    delta_reserved_for_positions = FixedPointField()
    delta_realized_pnl = FixedPointField()

    class Meta:
        model = LedgerEntry
        fields = [
            "id",
            "account",
            "kind",
            "delta_allocated",
            "delta_reserved_for_orders",
            "delta_reserved_for_positions",
            "delta_realized_pnl",
            "client_order_id",
            "exchange_trade_id",
            "reason",
            "created_at",
        ]


class OrderSerializer(serializers.ModelSerializer):
    symbol = serializers.CharField(source="instrument.symbol")
    feed = serializers.CharField(source="instrument.feed.name")
    strategy = serializers.CharField(source="strategy.name", default=None)
    quantity = FixedPointField()
    price = FixedPointField()
    filled_quantity = FixedPointField()
    average_fill_price = serializers.DecimalField(max_digits=40, decimal_places=8, read_only=True, allow_null=True)
    reserved = FixedPointField()

    class Meta:
        model = Order
        fields = [
            "id",
            "account",
            "client_order_id",
            "exchange_order_id",
            "strategy",
            "feed",
            "symbol",
            "intent",
            "side",
            "order_type",
            "quantity",
            "price",
            "status",
            "filled_quantity",
            "average_fill_price",
            "reserved",
            "via_reconciliation",
            "created_at",
            "updated_at",
        ]


class FillSerializer(serializers.ModelSerializer):
    client_order_id = serializers.CharField(source="order.client_order_id")
    symbol = serializers.CharField(source="order.instrument.symbol")
    side = serializers.CharField(source="order.side")
    quantity = FixedPointField()
    price = FixedPointField()
    fee = FixedPointField()
    executed_at = NanosecondsField(source="ts_event")

    class Meta:
        model = Fill
        fields = [
            "id",
            "account",
            "order",
            "client_order_id",
            "symbol",
            "side",
            "exchange_trade_id",
            "quantity",
            "price",
            "fee",
            "executed_at",
            "via_reconciliation",
            "created_at",
        ]


class PositionSerializer(serializers.ModelSerializer):
    symbol = serializers.CharField(source="instrument.symbol")
    feed = serializers.CharField(source="instrument.feed.name")
    strategy = serializers.CharField(source="strategy.name", default=None)
    quantity = FixedPointField()
    cost = FixedPointField()
    average_price = serializers.DecimalField(max_digits=40, decimal_places=8, read_only=True, allow_null=True)
    realized_pnl = FixedPointField()
    last_price = FixedPointField()
    unrealized_pnl = serializers.SerializerMethodField()
    # Kept after the position closes (quantity and cost are 0 then).
    entry_quantity = FixedPointField()
    entry_price = serializers.SerializerMethodField()
    exit_quantity = FixedPointField()
    exit_price = serializers.SerializerMethodField()
    fees = FixedPointField()

    class Meta:
        model = Position
        fields = [
            "id",
            "account",
            "strategy",
            "feed",
            "symbol",
            "side",
            "state",
            "quantity",
            "cost",
            "average_price",
            "realized_pnl",
            "last_price",
            "unrealized_pnl",
            "opened_at",
            "closed_at",
            "entry_quantity",
            "entry_price",
            "entry_at",
            "exit_quantity",
            "exit_price",
            "exit_at",
            "fees",
            "exit_reason",
        ]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_entry_price(self, position: Position) -> str | None:
        """Average price of the entry fills."""
        price = entry_price(position)
        return None if price is None else str(price)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_exit_price(self, position: Position) -> str | None:
        """Average price of the exit fills (their closing part)."""
        price = exit_price(position)
        return None if price is None else str(price)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_unrealized_pnl(self, position: Position) -> str | None:
        """Mark-to-market at the newest recorded tick; null without one or when closed."""
        if position.state != Position.State.OPEN:
            return None
        pnl = unrealized_pnl(
            side=position.side,
            quantity=position.quantity,
            cost=position.cost,
            last_price=getattr(position, "last_price", None),
            multiplier=fixed_from_decimal(position.instrument.contract_multiplier),
        )
        return None if pnl is None else fixed_to_str(pnl)


class SignalOutcomeSerializer(serializers.ModelSerializer):
    """What became of a signal on one account (account null: it reached no account)."""

    outcome = serializers.ChoiceField(choices=Outcome.choices, read_only=True)
    outcome_label = serializers.CharField(source="get_outcome_display", read_only=True)
    traded = serializers.BooleanField(read_only=True, help_text="A broker order exists for it (client_order_id).")
    decided_at = serializers.DateTimeField(source="updated_at", read_only=True)

    class Meta:
        model = SignalOutcome
        fields = ["account", "outcome", "outcome_label", "reason", "client_order_id", "traded", "decided_at"]


class SignalSerializer(serializers.ModelSerializer):
    """A signal with its outcome on each of the caller's accounts (see signal_outcomes_attach)."""

    price = FixedPointField(source="price_fixed")
    occurred_at = NanosecondsField(source="occurrence_ns")
    outcomes = SignalOutcomeSerializer(source="visible_outcomes", many=True, read_only=True)
    traded = serializers.SerializerMethodField()

    class Meta:
        model = StrategySignal
        fields = [
            "id",
            "strategy",
            "strategy_name",
            "feed",
            "symbol",
            "kind",
            "price",
            "emitted_at",
            "occurred_at",
            "output_id",
            "outcomes",
            "traded",
        ]

    def get_traded(self, signal: StrategySignal) -> bool:
        """True when the signal traded on at least one of the outcomes listed."""
        return any(row.traded for row in getattr(signal, "visible_outcomes", ()))


class TradeSettingBriefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    account = serializers.IntegerField(source="account_id")
    quantity = serializers.DecimalField(max_digits=24, decimal_places=8)
    mode = serializers.CharField()
    enabled = serializers.BooleanField()


class StrategySerializer(serializers.ModelSerializer):
    instruments = serializers.SerializerMethodField()
    trade_settings = serializers.SerializerMethodField()

    class Meta:
        model = Strategy
        fields = ["id", "name", "kind", "params", "enabled", "instruments", "trade_settings", "updated_at"]

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_instruments(self, strategy: Strategy) -> list[str]:
        return [f"{i.feed.name}:{i.symbol}" for i in strategy.instruments.all()]

    @extend_schema_field(TradeSettingBriefSerializer(many=True))
    def get_trade_settings(self, strategy: Strategy) -> list[dict[str, Any]]:
        """Only the caller's own trade settings of this strategy."""
        mine = [s for s in strategy.trade_settings.all() if s.account.owner_id == self.context["request"].user.pk]
        return TradeSettingBriefSerializer(mine, many=True).data  # type: ignore[return-value]  # a ReturnList with many=True


class PromptSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuthPrompt
        fields = [
            "id",
            "recovery_token",
            "broker",
            "kind",
            "terminal",
            "message",
            "login_url",
            "last_error",
            "created_at",
        ]
