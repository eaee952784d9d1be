"""The entry and exit figures a position keeps, so a closed trade still says what it was.

A position's quantity and cost fall to 0 as it closes; these running totals do not.
They are changed only here, called by the fill handlers (orders.lifecycle) on the
position row they hold locked, in the transaction that books the fill: the figures and
the fill commit together or not at all.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, localcontext

from core.fixed_point import SCALE_DIGITS
from orders.models import OrderIntent, Position

RECONCILIATION = "reconciliation"
PRICE_PLACES = Decimal(1).scaleb(-SCALE_DIGITS)  # every digit a fixed-point price has


def average_price(notional: int, quantity: int, multiplier: Decimal) -> Decimal | None:
    """The average fill price behind a notional (quantity x price x multiplier); None for no quantity."""
    if not quantity or not multiplier:
        return None
    with localcontext() as context:
        context.prec = 60
        price = (Decimal(notional) / (Decimal(quantity) * multiplier)).quantize(PRICE_PLACES).normalize()
    return Decimal(format(price, "f"))  # 110, not 1.1E+2


def entry_price(position: Position) -> Decimal | None:
    return average_price(position.entry_notional, position.entry_quantity, position.instrument.contract_multiplier)


def exit_price(position: Position) -> Decimal | None:
    return average_price(position.exit_notional, position.exit_quantity, position.instrument.contract_multiplier)


def broker_time(ts_event: int) -> datetime:
    """UTC nanoseconds as an aware datetime (microseconds: what the database column keeps)."""
    seconds, nanos = divmod(ts_event, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=nanos // 1000)


def figures_add_entry(position: Position, *, quantity: int, value: int, fee: int, ts_event: int) -> list[str]:
    """Count one entry fill; return the fields changed (the caller saves them with its own)."""
    position.entry_quantity += quantity
    position.entry_notional += value
    position.fees += fee
    at = broker_time(ts_event)
    if position.entry_at is None or at < position.entry_at:
        position.entry_at = at
    return ["entry_quantity", "entry_notional", "fees", "entry_at"]


def figures_add_exit(
    position: Position, *, closing: int, proceeds: int, fee: int, ts_event: int, reason: str
) -> list[str]:
    """Count one exit fill (its closing part); `reason` is kept once the position is flat."""
    position.exit_quantity += closing
    position.exit_notional += proceeds
    position.fees += fee
    at = broker_time(ts_event)
    if position.exit_at is None or at > position.exit_at:
        position.exit_at = at
    if position.quantity == 0:
        position.exit_reason = reason[:24]
    return ["exit_quantity", "exit_notional", "fees", "exit_at", "exit_reason"]


def exit_reason(*, intent_row_id: int, via_reconciliation: bool) -> str:
    """Why the closing order was sent: its signal's kind (EXIT_LONG, ...), or reconciliation."""
    if via_reconciliation:
        return RECONCILIATION
    kind = OrderIntent.objects.values_list("signal_kind", flat=True).filter(pk=intent_row_id).first()
    return kind or "order"
