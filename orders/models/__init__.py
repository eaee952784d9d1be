"""The orders app's tables, one module per idea.

Prices, quantities and money in the new tables are fixed-point integers at
core.fixed_point.SCALE (value times 10**12, core.fixed_point_field), as in the tick
table: SQLite keeps only 15 significant digits of a DecimalField and sums it as float,
and a ledger must add up exactly on both databases.
"""

from orders.models.accounts import Account, Reversal, TradeMode, TradeSetting
from orders.models.audit import AuditEvent
from orders.models.ledger import CapitalLedger, LedgerEntry
from orders.models.lifecycle import Fill, Order, OrderIntent, OrderSide, OrderStatus, OrderType, Position, PositionSide
from orders.models.locks import EntryLock
from orders.models.outcomes import Outcome, SignalOutcome
from orders.models.paper import PaperFill, PaperOrder

__all__ = [
    "Account",
    "AuditEvent",
    "CapitalLedger",
    "EntryLock",
    "Fill",
    "LedgerEntry",
    "Order",
    "OrderIntent",
    "OrderSide",
    "OrderStatus",
    "OrderType",
    "Outcome",
    "PaperFill",
    "PaperOrder",
    "Position",
    "PositionSide",
    "Reversal",
    "SignalOutcome",
    "TradeMode",
    "TradeSetting",
]
