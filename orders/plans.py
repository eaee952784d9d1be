"""Turn a signal into per-account trade plans (pure rounding + one query for the settings)."""
from __future__ import annotations

from dataclasses import dataclass

from feeds.market import fixed_from_decimal
from orders.models import TradeSetting
from orders.money import round_to_step
from processor.signals import Signal


@dataclass(frozen=True, slots=True)
class TradePlan:
    """One account's share of a signal: who, where, how much (fixed point, rounded to the lot)."""

    account_id: int
    owner_id: int
    broker: str
    mode: str
    strategy_id: int
    instrument_id: int
    venue_symbol: str
    tick_size: int
    lot_size: int
    multiplier: int
    quantity: int
    order_type: str


def signal_key(signal: Signal) -> str:
    """The identity of a signal: equal in every process that sees the same emission."""
    return "|".join(
        (str(signal.strategy_id), signal.feed, signal.symbol, str(signal.kind), str(signal.occurrence_ns), signal.output_id)
    )


def plans_for_signal(signal: Signal) -> list[TradePlan]:
    """Return a plan per enabled trade setting of the signal's strategy whose account trades that instrument."""
    settings_rows = TradeSetting.objects.filter(strategy_id=signal.strategy_id, enabled=True).select_related("account")
    settings_list = list(settings_rows)
    if not settings_list:
        return []
    from feeds.models import Instrument

    instrument = (
        Instrument.objects.filter(feed__name=signal.feed, venue_symbol=signal.symbol)
        .values("id", "tick_size", "lot_size", "contract_multiplier")
        .first()
    )
    if instrument is None:
        return []
    lot = fixed_from_decimal(instrument["lot_size"])
    plans = []
    for setting in settings_list:
        plans.append(
            TradePlan(
                account_id=setting.account_id,
                owner_id=setting.account.owner_id,
                broker=setting.account.broker,
                mode=setting.mode,
                strategy_id=signal.strategy_id,
                instrument_id=instrument["id"],
                venue_symbol=signal.symbol,
                tick_size=fixed_from_decimal(instrument["tick_size"]),
                lot_size=lot,
                multiplier=fixed_from_decimal(instrument["contract_multiplier"]),
                quantity=round_to_step(fixed_from_decimal(setting.quantity), lot),
                order_type=setting.order_type,
            )
        )
    return plans
