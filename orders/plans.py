"""Turn a signal into per-account trade plans (pure rounding + one query for the settings and the instrument).

The settings, their accounts and the instrument are one read (orders.selectors).
A plan for an instrument whose metadata (tick size, lot size, multiplier) the venue has
not confirmed, or confirmed too long ago, carries the reason in `metadata_missing`:
its sizes are the site's stored guesses, and an entry sized from them is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.utils import timezone

from feeds.market import fixed_from_decimal
from orders.money import round_to_step
from processor.signals import Signal

if TYPE_CHECKING:
    from orders.selectors import InstrumentRow, SettingRow


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
    # Why the instrument's metadata is not known (None = known). The executor refuses an
    # entry with it (outcome NO_METADATA, this text as the reason); an exit still closes
    # what is open, since a position must always be able to close.
    metadata_missing: str | None = None


def signal_key(signal: Signal) -> str:
    """The identity of a signal: equal in every process that sees the same emission."""
    return "|".join(
        (
            str(signal.strategy_id),
            signal.feed,
            signal.symbol,
            str(signal.kind),
            str(signal.occurrence_ns),
            signal.output_id,
        )
    )


def plans_for_signal(signal: Signal) -> list[TradePlan]:
    """Return a plan per enabled trade setting of the signal's strategy whose account trades that instrument."""
    from orders.selectors import trade_settings_on_instrument

    instrument, settings_list = trade_settings_on_instrument(
        strategy_id=signal.strategy_id, feed=signal.feed, venue_symbol=signal.symbol
    )
    return _plans(signal, instrument, settings_list)


def plans_for_signals(signals: Sequence[Signal]) -> list[list[TradePlan]]:
    """`plans_for_signal` for each of `signals`, their settings read in one round trip."""
    from orders.selectors import trade_settings_on_instruments

    found = trade_settings_on_instruments([(s.strategy_id, s.feed, s.symbol) for s in signals])
    return [_plans(signal, instrument, settings_list) for signal, (instrument, settings_list) in zip(signals, found)]


def _plans(signal: Signal, instrument: InstrumentRow | None, settings_list: list[SettingRow]) -> list[TradePlan]:
    from feeds.distribution.metadata_gate import metadata_missing_reason
    from feeds.distribution.redispub.metadata import metadata_max_age_s, venue_lists_metadata
    from orders.account_audience import account_audience_seen

    if instrument is None:
        return []
    missing = metadata_missing_reason(
        lists_metadata=venue_lists_metadata(instrument.venue),
        refreshed_at=instrument.metadata_refreshed_at,
        problem=instrument.metadata_problem,
        now=timezone.now(),
        max_age_s=metadata_max_age_s(),
    )
    lot = fixed_from_decimal(instrument.lot_size)
    tick = fixed_from_decimal(instrument.tick_size)
    multiplier = fixed_from_decimal(instrument.contract_multiplier)
    for setting in settings_list:
        # The outcome pushes need the owner and name: read here already, not once more per account.
        account_audience_seen(account_id=setting.account_id, owner_id=setting.owner_id, name=setting.account_name)
    return [
        TradePlan(
            account_id=setting.account_id,
            owner_id=setting.owner_id,
            broker=setting.broker,
            mode=setting.mode,
            strategy_id=signal.strategy_id,
            instrument_id=instrument.id,
            venue_symbol=signal.symbol,
            tick_size=tick,
            lot_size=lot,
            multiplier=multiplier,
            quantity=round_to_step(fixed_from_decimal(setting.quantity), lot),
            order_type=setting.order_type,
            metadata_missing=f"{signal.symbol} metadata not known: {missing}" if missing else None,
        )
        for setting in settings_list
    ]
