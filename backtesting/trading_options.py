"""The trading options of the backtest commands, and the simulated settings they make."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser

from backtesting.simulated_account import SimulatedSettings
from feeds.market import parse_fixed
from orders.brokers.paper import PaperFees
from orders.models.accounts import Reversal
from orders.models.lifecycle import OrderType
from orders.risk_limits import AccountLimits, ExitLevels
from processor.strategies import clean_params

_DEFAULT_FEES = PaperFees()


def add_trading_arguments(parser: CommandParser) -> None:
    trading = parser.add_argument_group("trading")
    trading.add_argument("--capital", default="10000", help="starting capital (exact decimal)")
    trading.add_argument("--quantity", default="0.01", help="quantity of each entry (exact decimal)")
    trading.add_argument("--lot-size", default="0.001", help="the instrument's lot size")
    trading.add_argument("--tick-size", default="0.01", help="the instrument's tick size")
    trading.add_argument("--order-type", choices=[OrderType.MARKET, OrderType.LIMIT], default=OrderType.MARKET)
    trading.add_argument("--reversal", choices=list(Reversal.values), default=Reversal.AFTER_EXIT_FILL)
    trading.add_argument("--taker-bps", type=int, default=_DEFAULT_FEES.taker_bps, help="taker fee, basis points")
    trading.add_argument("--maker-bps", type=int, default=_DEFAULT_FEES.maker_bps, help="maker fee, basis points")
    trading.add_argument("--latency-ms", type=float, default=0.0, help="signal to order on the exchange")
    risk = parser.add_argument_group("risk limits (the trade setting's exit levels and the account's limits)")
    risk.add_argument("--stop-loss-pct", help="close when the price moves this many percent against the entry")
    risk.add_argument("--take-profit-pct", help="close when the price moves this many percent in favour")
    risk.add_argument("--trailing-stop-pct", help="close when the price falls back this many percent from its best")
    risk.add_argument("--max-open-positions", type=int, help="refuse entries while this many instruments are open")
    risk.add_argument("--daily-loss-limit", help="halt entries for the UTC day once realized P&L reaches minus this")


def _amount(options: dict[str, Any], name: str) -> int:
    try:
        value = parse_fixed(str(options[name]))
    except (ValueError, ArithmeticError):
        raise CommandError(f"--{name.replace('_', '-')}: not an exact decimal: {options[name]!r}") from None
    if value <= 0:
        raise CommandError(f"--{name.replace('_', '-')} must be above zero")
    return value


def _percent(options: dict[str, Any], name: str, below: int = 100) -> Decimal | None:
    """A trade setting's exit level: above 0 and below `below`, at most 4 decimal places, as its model field."""
    text = options.get(name)
    if text is None:
        return None
    option = f"--{name.replace('_', '-')}"
    try:
        value = Decimal(str(text))
    except InvalidOperation:
        raise CommandError(f"{option}: not a decimal: {text!r}") from None
    if not value.is_finite() or not 0 < value < below or value != value.quantize(Decimal("0.0001")):
        raise CommandError(f"{option} must be above 0 and below {below}, with at most 4 decimal places")
    return value


def risk_terms(options: dict[str, Any]) -> tuple[ExitLevels, AccountLimits]:
    """The exit levels and account limits the options name; a bad value is a CommandError naming its option."""
    levels = ExitLevels.from_percent(
        _percent(options, "stop_loss_pct"),
        _percent(options, "take_profit_pct", below=1000),
        _percent(options, "trailing_stop_pct"),
    )
    maximum = options.get("max_open_positions")
    if maximum is not None and maximum < 1:
        raise CommandError("--max-open-positions must be at least 1")
    loss = _amount(options, "daily_loss_limit") if options.get("daily_loss_limit") is not None else None
    return levels, AccountLimits(max_open_positions=maximum, daily_loss_limit=loss)


def simulated_settings(options: dict[str, Any]) -> SimulatedSettings:
    """Return the settings the options name; a bad value is a CommandError naming its option."""
    for name in ("taker_bps", "maker_bps"):
        if not 0 <= options[name] <= 10_000:
            raise CommandError(f"--{name.replace('_', '-')} must be from 0 to 10000")
    if not 0 <= options["latency_ms"] <= 3_600_000:
        raise CommandError("--latency-ms must be from 0 to 3600000")
    levels, limits = risk_terms(options)
    return SimulatedSettings(
        capital=_amount(options, "capital"),
        quantity=_amount(options, "quantity"),
        lot_size=_amount(options, "lot_size"),
        tick_size=_amount(options, "tick_size"),
        order_type=options["order_type"],
        reversal=options["reversal"],
        fees=PaperFees(taker_bps=options["taker_bps"], maker_bps=options["maker_bps"]),
        latency_ns=int(options["latency_ms"] * 1_000_000),
        exit_levels=levels,
        limits=limits,
    )


def validation_detail(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in exc.message_dict.items())
    return "; ".join(exc.messages)


def json_object(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{option} is not JSON: {exc}") from None


def cleaned_params(kind: str, raw: Any, option: str = "--params") -> dict[str, Any]:
    try:
        return clean_params(kind, raw)
    except ValidationError as exc:
        raise CommandError(f"invalid {option} for {kind}: {validation_detail(exc)}") from None
