"""The closed-trade and performance representations of the API: money as exact decimal strings."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from dashboard.trades import trade_row
from orders.models import Position


class TradeSerializer(serializers.Serializer):
    """One closed trade: what was entered, what was exited, and what it made after fees."""

    id = serializers.IntegerField(read_only=True)
    account = serializers.IntegerField(read_only=True, help_text="Account id.")
    account_name = serializers.CharField(read_only=True)
    strategy = serializers.CharField(read_only=True, allow_null=True, help_text="Strategy name.")
    strategy_id = serializers.IntegerField(read_only=True, allow_null=True)
    feed = serializers.CharField(read_only=True)
    symbol = serializers.CharField(read_only=True)
    side = serializers.CharField(read_only=True, help_text="LONG or SHORT.")
    entry_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="Broker time of the first entry fill."
    )
    entry_price = serializers.CharField(read_only=True, allow_null=True, help_text="Average entry fill price.")
    exit_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text="Broker time of the last exit fill.")
    exit_price = serializers.CharField(read_only=True, allow_null=True, help_text="Average exit fill price.")
    quantity = serializers.CharField(read_only=True, help_text="Entry quantity.")
    duration_s = serializers.IntegerField(read_only=True, allow_null=True)
    gross_pnl = serializers.CharField(read_only=True, help_text="P&L before fees.")
    fees = serializers.CharField(read_only=True, help_text="Fees of the entry and exit fills.")
    pnl = serializers.CharField(read_only=True, help_text="Realized P&L after fees.")
    pnl_percent = serializers.CharField(read_only=True, allow_null=True, help_text="pnl / entry notional x 100.")
    exit_reason = serializers.CharField(read_only=True, help_text="The closing order's signal kind, or reconciliation.")

    def to_representation(self, instance: Position) -> dict[str, Any]:
        row = trade_row(instance)
        return {
            "id": instance.pk,
            "account": instance.account_id,
            "account_name": instance.account.name,
            "strategy": instance.strategy.name if instance.strategy else None,
            "strategy_id": instance.strategy_id,
            "feed": instance.instrument.feed.name,
            "symbol": instance.instrument.symbol,
            "side": instance.side,
            "entry_at": None if instance.entry_at is None else instance.entry_at.isoformat(),
            "entry_price": None if row.entry_price is None else str(row.entry_price),
            "exit_at": None if instance.exit_at is None else instance.exit_at.isoformat(),
            "exit_price": None if row.exit_price is None else str(row.exit_price),
            "quantity": row.quantity,
            "duration_s": None if row.duration is None else int(row.duration.total_seconds()),
            "gross_pnl": row.gross_pnl,
            "fees": row.fees,
            "pnl": row.pnl,
            "pnl_percent": None if row.pnl_percent is None else str(row.pnl_percent),
            "exit_reason": instance.exit_reason,
        }


class _StatsSerializer(serializers.Serializer):
    trades = serializers.IntegerField()
    wins = serializers.IntegerField()
    losses = serializers.IntegerField()
    net_pnl = serializers.CharField()
    gross_profit = serializers.CharField()
    gross_loss = serializers.CharField()
    fees = serializers.CharField()
    best = serializers.CharField(allow_null=True)
    worst = serializers.CharField(allow_null=True)
    win_rate = serializers.CharField(allow_null=True, help_text="Percent of trades with P&L > 0.")
    profit_factor = serializers.CharField(allow_null=True, help_text="Gross profit / gross loss; null without a loss.")
    average_win = serializers.CharField(allow_null=True)
    average_loss = serializers.CharField(allow_null=True)


class _GroupSerializer(_StatsSerializer):
    name = serializers.CharField(help_text="The instrument (feed / symbol), strategy or account.")


class _PeriodSerializer(serializers.Serializer):
    start = serializers.DateField()
    trades = serializers.IntegerField()
    pnl = serializers.CharField()


class _EquitySerializer(serializers.Serializer):
    day = serializers.DateField()
    equity = serializers.CharField()


class PerformanceSerializer(serializers.Serializer):
    """The performance report (dashboard.performance.report_json), for the schema."""

    capital = serializers.CharField()
    summary = _StatsSerializer()
    max_drawdown = serializers.CharField()
    max_drawdown_percent = serializers.CharField(allow_null=True)
    drawdown_peak_equity = serializers.CharField()
    ledger_realized_pnl = serializers.CharField(
        help_text="The capital ledger's realized P&L (the sum of its journal), all time."
    )
    by_instrument = _GroupSerializer(many=True)
    by_strategy = _GroupSerializer(many=True)
    by_account = _GroupSerializer(many=True)
    daily = _PeriodSerializer(many=True)
    weekly = _PeriodSerializer(many=True)
    monthly = _PeriodSerializer(many=True)
    equity_curve = _EquitySerializer(many=True)
