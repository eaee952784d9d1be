"""Risk limits: what refuses an entry (open positions, daily loss) and when a position must exit.

Account limits (`Account.max_open_positions`, `Account.daily_loss_limit`) are asked by
the trade executor's entry gate (`entry_risk_refusal`, wired by the composition root
beside the kill switch), which runs inside the entry's reserve transaction after the
account's ledger row is locked: every entry on the account takes that lock first, so
two entries never both see room for the last position.

Exit levels (`TradeSetting.stop_loss_pct`, `take_profit_pct`, `trailing_stop_pct`) are a
pure function of a position's side, entry price, best price since entry and the tick
(`exit_trigger`); `orders.risk_watch` applies it to every tick of a watched position.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.db.models import Q, Sum

from core.fixed_point import SCALE
from feeds.market import fixed_from_decimal, fixed_to_decimal
from orders.models import Account, LedgerEntry, OrderIntent, Position
from orders.models.lifecycle import Intent, PositionSide

# Limits are read at most this often per account on the entry path (an edit applies within it).
LIMITS_TTL_S = 2.0
_HUNDRED = Decimal(100)


@dataclass(frozen=True, slots=True)
class AccountLimits:
    max_open_positions: int | None
    daily_loss_limit: int | None  # fixed point, positive

    @property
    def any(self) -> bool:
        return self.max_open_positions is not None or self.daily_loss_limit is not None


_limits_cache: dict[int, tuple[float, AccountLimits]] = {}


def account_limits(account_id: int, *, now_s: float | None = None) -> AccountLimits:
    """The account's limits, read at most every LIMITS_TTL_S seconds."""
    now_s = time.monotonic() if now_s is None else now_s
    cached = _limits_cache.get(account_id)
    if cached is not None and now_s - cached[0] < LIMITS_TTL_S:
        return cached[1]
    row = Account.objects.filter(pk=account_id).values_list("max_open_positions", "daily_loss_limit").first()
    limits = AccountLimits(
        max_open_positions=row[0] if row else None,
        daily_loss_limit=fixed_from_decimal(row[1]) if row and row[1] is not None else None,
    )
    _limits_cache[account_id] = (now_s, limits)
    return limits


def limits_forget() -> None:
    """Drop the cached limits (tests, and a process that just changed them)."""
    _limits_cache.clear()


def utc_day_start(now: datetime | None = None) -> datetime:
    now = now or datetime.now(UTC)
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def realized_today(account_id: int, *, now: datetime | None = None) -> int:
    """Realized P&L (fees included) journaled on the account since 00:00 UTC, fixed point: one aggregate."""
    total = LedgerEntry.objects.filter(account_id=account_id, created_at__gte=utc_day_start(now)).aggregate(
        total=Sum("delta_realized_pnl")
    )["total"]
    return int(total or 0)


def daily_loss_reached(account_id: int, limit: int, *, now: datetime | None = None) -> str | None:
    """The reason the account's daily loss limit is reached, or None."""
    return loss_reason(realized_today(account_id, now=now), limit)


def loss_reason(realized: int, limit: int) -> str | None:
    """Why `realized` (fixed point, since 00:00 UTC) reaches the daily loss `limit`, or None."""
    if realized > -limit:
        return None
    return (
        f"daily loss limit: realized {fixed_to_decimal(realized)} since 00:00 UTC "
        f"reaches the limit of {fixed_to_decimal(limit)}"
    )


def open_positions_count(account_id: int) -> int:
    """Instruments with an open position or a pending entry on the account."""
    positions = set(
        Position.objects.filter(account_id=account_id, state=Position.State.OPEN).values_list(
            "instrument_id", flat=True
        )
    )
    pending = OrderIntent.objects.filter(
        Q(account_id=account_id) & Q(intent=Intent.ENTRY) & Q(state=OrderIntent.State.PENDING)
    ).values_list("instrument_id", flat=True)
    return len(positions | set(pending))


def entry_risk_refusal(account_id: int) -> str | None:
    """Why a new entry on the account breaks a risk limit, or None; run under the account's ledger lock.

    An account without limits costs no query here beyond the cached limits read.
    """
    limits = account_limits(account_id)
    if not limits.any:
        return None
    return limits_refusal(
        limits,
        realized_today=lambda: realized_today(account_id),
        open_positions=lambda: open_positions_count(account_id),
    )


def limits_refusal(
    limits: AccountLimits, *, realized_today: Callable[[], int], open_positions: Callable[[], int]
) -> str | None:
    """Why a new entry breaks `limits`, or None: the daily loss first, then the open positions.

    Pure but for the two figures, asked only when their limit is set (the live gate reads
    them from the database, a backtest from its simulated account).
    """
    if limits.daily_loss_limit is not None:
        reached = loss_reason(realized_today(), limits.daily_loss_limit)
        if reached:
            return reached
    if limits.max_open_positions is not None:
        return positions_reason(open_positions(), limits.max_open_positions)
    return None


def positions_reason(count: int, maximum: int) -> str | None:
    """Why `count` instruments open (or with a pending entry) leave no room under `maximum`, or None."""
    if count < maximum:
        return None
    return f"risk limit: {count} positions open, the account's maximum is {maximum}"


# ---- exit levels --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExitLevels:
    """A trade setting's exit levels, as fractions (percent / 100); None = not set."""

    stop_loss: Decimal | None = None
    take_profit: Decimal | None = None
    trailing_stop: Decimal | None = None

    @classmethod
    def from_percent(
        cls, stop_loss: Decimal | None, take_profit: Decimal | None, trailing_stop: Decimal | None
    ) -> ExitLevels:
        def fraction(value: Decimal | None) -> Decimal | None:
            return None if value is None else Decimal(value) / _HUNDRED

        return cls(fraction(stop_loss), fraction(take_profit), fraction(trailing_stop))

    @property
    def any(self) -> bool:
        return self.stop_loss is not None or self.take_profit is not None or self.trailing_stop is not None


# Levels are compared in integers: percent has 4 decimal places, so a fraction is n / 10^6.
_FRACTION_DENOMINATOR = 1_000_000


def _parts(fraction: Decimal) -> int:
    return int(fraction * _FRACTION_DENOMINATOR)


def _at_or_beyond(price: int, reference: int, fraction: Decimal, *, up: bool) -> bool:
    """Exactly: price >= reference * (1 + fraction) when `up`, else price <= reference * (1 - fraction)."""
    n = _parts(fraction)
    if up:
        return price * _FRACTION_DENOMINATOR >= reference * (_FRACTION_DENOMINATOR + n)
    return price * _FRACTION_DENOMINATOR <= reference * (_FRACTION_DENOMINATOR - n)


def exit_trigger(*, side: str, entry_price: int, best_price: int, price: int, levels: ExitLevels) -> str | None:
    """Which exit level `price` reaches for a position (stop_loss, take_profit, trailing_stop), or None.

    Pure and exact (integer comparisons). LONG: stop below the entry, target above it,
    trailing stop below the best price seen since entry. SHORT mirrors it. A price that
    reaches both a stop and a target is a stop.
    """
    long = side == PositionSide.LONG
    if levels.stop_loss is not None and _at_or_beyond(price, entry_price, levels.stop_loss, up=not long):
        return "stop_loss"
    if levels.trailing_stop is not None and _at_or_beyond(price, best_price, levels.trailing_stop, up=not long):
        return "trailing_stop"
    if levels.take_profit is not None and _at_or_beyond(price, entry_price, levels.take_profit, up=long):
        return "take_profit"
    return None


def better(side: str, best: int, price: int) -> int:
    """The best price since entry after `price`: the highest for a long, the lowest for a short."""
    return max(best, price) if side == PositionSide.LONG else min(best, price)


def average_price(cost: int, quantity: int) -> int:
    """A position's average entry price, fixed point."""
    return cost * SCALE // quantity if quantity else 0
