"""The broker interface and the exact value types that cross it.

Every broker speaks in Decimal-free fixed-point integers (core.fixed_point.SCALE) and our
own status names; adapters convert at the edge, through the venue's strings.
Errors tell apart what is known from what is not: BrokerRejected means the order
certainly does not exist; BrokerUnavailable means the outcome is unknown, and a
timeout never turns unknown into "rejected" (reconciliation asks the broker later).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from orders.models.lifecycle import OrderStatus


@dataclass(frozen=True, slots=True)
class OrderRequest:
    client_order_id: str
    symbol: str  # the venue's spelling
    side: str  # OrderSide
    order_type: str  # OrderType
    quantity: int  # fixed point, already rounded to the lot
    price: int | None  # fixed point limit price, rounded to the tick; None for market
    reduce_only: bool = False


@dataclass(frozen=True, slots=True)
class BrokerOrder:
    """An order as the broker reports it."""

    client_order_id: str
    exchange_order_id: str
    symbol: str
    side: str
    order_type: str
    quantity: int
    price: int | None
    status: OrderStatus
    filled_quantity: int = 0


@dataclass(frozen=True, slots=True)
class BrokerFill:
    """One execution as the broker reports it."""

    exchange_trade_id: str
    exchange_order_id: str
    symbol: str
    side: str
    quantity: int
    price: int
    fee: int  # in the account currency, fixed point
    ts_event: int  # UTC ns


@dataclass(frozen=True, slots=True)
class BrokerPosition:
    """The account's net position in one symbol as the broker reports it."""

    symbol: str
    quantity: int  # signed, fixed point: long positive, short negative


class BrokerError(Exception):
    """Base of broker failures; messages never carry a token."""


class BrokerRejected(BrokerError):
    """The broker refused the order: it does not exist there."""


class DuplicateClientOrderId(BrokerError):
    """The broker already has an order with this client id (a retry, or another process won)."""


class BrokerUnavailable(BrokerError):
    """Timeout, network failure or 5xx: the outcome is unknown."""


class OrderNotFound(BrokerError):
    """The broker has no order with this id."""


class Broker(Protocol):
    """What the trade executor and reconciliation need from a venue."""

    name: str

    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        """Place the order; raise BrokerRejected, DuplicateClientOrderId or BrokerUnavailable."""

    async def cancel_order(self, *, client_order_id: str, exchange_order_id: str, symbol: str) -> BrokerOrder:
        """Cancel a working order and return its final state (it may have filled meanwhile)."""

    async def fetch_order(self, *, client_order_id: str, symbol: str) -> BrokerOrder:
        """Return the order with this client id; raise OrderNotFound if the broker never had it."""

    async def open_orders(self, *, symbols: Sequence[str]) -> list[BrokerOrder]:
        """Return every working order (all symbols when the venue allows; else the given ones)."""

    async def fills(self, *, symbols: Sequence[str], since_ns: int) -> list[BrokerFill]:
        """Return executions since `since_ns` on the given symbols."""

    async def positions(self) -> list[BrokerPosition]:
        """Return the account's non-zero net position per symbol; BrokerUnavailable when the venue cannot say."""

    async def close(self) -> None:
        """Release sessions; safe to call twice."""
