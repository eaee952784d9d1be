"""What the ledger says a strategy holds on one instrument, for the processor's executions.

Read-only. The processor asks this (through a callable the runtime injects) when an
execution starts, so a restarted strategy resumes the position it opened before,
instead of coming up flat while its accounts still hold it.
"""

from __future__ import annotations

from dataclasses import dataclass

from orders.models import Position as PositionRow
from orders.models import PositionSide, TradeSetting
from processor.signals import Position

_SIDE = {PositionSide.LONG: Position.LONG, PositionSide.SHORT: Position.SHORT}


@dataclass(frozen=True)
class HeldPosition:
    position: Position
    # Empty when every account trading the strategy agrees; otherwise who holds what.
    disagreement: str = ""


def strategy_held_position(strategy_id: int, feed: str, venue_symbol: str) -> HeldPosition:
    """The side of the strategy's OPEN positions on (feed, venue symbol) across its accounts.

    A position counts from the moment its entry order is confirmed (quantity may still be
    0): the strategy decided to enter, and its exit must cancel or close that entry. When
    accounts disagree (one holds the position, another trading the same strategy is flat,
    or one is long and another short), the open side wins, the most recently opened one
    when both are, so the strategy manages the exit of what is open; the disagreement is
    described for the caller to report.
    """
    rows = list(
        PositionRow.objects.filter(
            strategy_id=strategy_id,
            instrument__feed__name=feed,
            instrument__venue_symbol=venue_symbol,
            state=PositionRow.State.OPEN,
        )
        .order_by("-opened_at", "-id")
        .values_list("account_id", "side")
    )
    if not rows:
        return HeldPosition(Position.FLAT)
    held = _SIDE[PositionSide(rows[0][1])]
    holders = dict(rows)
    trading = set(
        TradeSetting.objects.filter(strategy_id=strategy_id, enabled=True).values_list("account_id", flat=True)
    )
    flat = sorted(trading - holders.keys())
    sides = set(holders.values())
    if len(sides) == 1 and not flat:
        return HeldPosition(held)
    parts = [
        f"{side} in account{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"
        for side in sorted(sides)
        for ids in [sorted(a for a, s in holders.items() if s == side)]
    ]
    if flat:
        parts.append(f"flat in account{'s' if len(flat) > 1 else ''} {', '.join(map(str, flat))}")
    return HeldPosition(held, f"accounts disagree on {venue_symbol}: {'; '.join(parts)}; resuming {held.name}")
