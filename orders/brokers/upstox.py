"""Upstox orders over its REST API, with tokens from the recovery app.

Live orders use the user's OAuth token, sandbox orders the provisioned sandbox token;
both come from recovery's TokenSource, whose `await_valid_token` waits while a login
is pending. A 401 (or errorCode UDAPI100050) invalidates the token it was sent with.

Endpoints (upstox-python-sdk 2.30.0 paths, hosts from its Configuration):
    POST   {order host}/v3/order/place     -> {"status":"success","data":{"order_ids":["..."]}}
    DELETE {order host}/v3/order/cancel?order_id=
    GET    {api host}/v2/order/retrieve-all            (today's order book)
    GET    {api host}/v2/order/trades/get-trades-for-day
    GET    {api host}/v2/portfolio/short-term-positions  (net `quantity` per instrument and product)
The sandbox host serves placement and cancel only (the SDK's sandbox_urls): sandbox
accounts cannot be reconciled by reading orders, trades or positions back, and say so
as an unknown outcome.
Our client order id travels in `tag`; Upstox does not refuse a repeated tag, so a
retry is never sent blindly: reconciliation looks the tag up in the order book first.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import httpx
import msgspec

from feeds.market import fixed_to_decimal
from orders.brokers.base import (
    BrokerFill,
    BrokerOrder,
    BrokerPosition,
    BrokerRejected,
    BrokerUnavailable,
    OrderNotFound,
    OrderRequest,
)
from orders.brokers.kinds import BrokerFactory, BrokerKind, BrokerSetup, register_broker
from orders.models.lifecycle import OrderStatus, OrderType
from orders.money import to_fixed
from recovery.datasource import TokenSource
from recovery.tokens import TokenError, TokenKey, TokenKind
from recovery.upstox import BrokerErrorKind, classify_upstox_error

IST = timezone(timedelta(hours=5, minutes=30))
STATUS = {
    "complete": OrderStatus.FILLED,
    "cancelled": OrderStatus.CANCELED,
    "rejected": OrderStatus.REJECTED,
}
_json = msgspec.json.Decoder(float_hook=Decimal)
_encode = msgspec.json.Encoder(decimal_format="number")


def parse_order_row(row: dict[str, Any]) -> BrokerOrder:
    """Return an order-book row as a BrokerOrder; any status not terminal counts as working. Pure."""
    status = STATUS.get(str(row.get("status", "")).lower())
    filled = Decimal(row.get("filled_quantity") or 0)
    if status is None:
        status = OrderStatus.PARTIALLY_FILLED if filled else OrderStatus.SUBMITTED
    price = Decimal(row.get("price") or 0)
    return BrokerOrder(
        client_order_id=row.get("tag") or "",
        exchange_order_id=str(row["order_id"]),
        symbol=row["instrument_token"],
        side=str(row["transaction_type"]).upper(),
        order_type=str(row["order_type"]).upper(),
        quantity=to_fixed(Decimal(row["quantity"])),
        price=to_fixed(price) or None,
        status=status,
        filled_quantity=to_fixed(filled),
    )


def parse_trade_row(row: dict[str, Any], *, received_ns: int) -> BrokerFill:
    """Return a trade-book row as a BrokerFill (Upstox reports no fee here). Pure."""
    return BrokerFill(
        exchange_trade_id=str(row["trade_id"]),
        exchange_order_id=str(row["order_id"]),
        symbol=row["instrument_token"],
        side=str(row["transaction_type"]).upper(),
        quantity=to_fixed(Decimal(row["quantity"])),
        price=to_fixed(Decimal(row["average_price"])),
        fee=0,
        ts_event=_timestamp_ns(row.get("exchange_timestamp") or row.get("order_timestamp"), received_ns),
    )


def parse_position_rows(rows: list[dict[str, Any]], *, product: str) -> list[BrokerPosition]:
    """Return the positions book as one signed net per instrument of `product`. Pure.

    Only the product the site places counts: a delivery holding of the same
    instrument is not exposure the site took.
    """
    net: dict[str, int] = {}
    for row in rows:
        if str(row.get("product", "")) != product:
            continue
        token = row["instrument_token"]
        net[token] = net.get(token, 0) + to_fixed(Decimal(row.get("quantity") or 0))
    return [BrokerPosition(symbol, quantity) for symbol, quantity in sorted(net.items()) if quantity]


def _timestamp_ns(text: Any, fallback_ns: int) -> int:
    if not isinstance(text, str):
        return fallback_ns
    for pattern in ("%Y-%m-%d %H:%M:%S", "%d-%b-%Y %H:%M:%S"):
        try:
            return int(datetime.strptime(text, pattern).replace(tzinfo=IST).timestamp()) * 1_000_000_000
        except ValueError:
            continue
    return fallback_ns


class UpstoxBroker:
    name = "upstox"

    def __init__(
        self,
        *,
        tokens: TokenSource,
        order_url: str,
        api_url: str,
        sandbox: bool,
        product: str = "I",
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._tokens = tokens
        self._order_url = order_url.rstrip("/")
        self._api_url = api_url.rstrip("/")
        self._sandbox = sandbox
        self._product = product
        self._timeout_s = timeout_s
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self._timeout_s, transport=self._transport)
        return self._client

    async def _request(
        self, method: str, url: str, *, json_body: bytes | None = None, params: dict[str, str] | None = None
    ) -> Any:
        try:
            token = await self._tokens.await_valid_token()
        except TokenError as exc:
            raise BrokerUnavailable(f"upstox token: {exc}") from exc
        headers = {"Accept": "application/json", "Api-Version": "2.0", "Authorization": token.authorization_header()}
        if json_body is not None:
            headers["Content-Type"] = "application/json"
        try:
            response = await self._http().request(method, url, content=json_body, params=params, headers=headers)
        except httpx.HTTPError as exc:
            raise BrokerUnavailable(f"upstox {method} {url}: {type(exc).__name__}") from exc
        if response.status_code >= 400:
            error = classify_upstox_error(response.status_code, response.content)
            if error.kind is BrokerErrorKind.INVALID_TOKEN:
                await self._tokens.invalidate(token.fingerprint, error.describe())
                raise BrokerRejected(f"upstox: token rejected ({error.describe()})")
            if error.kind in (BrokerErrorKind.TRANSIENT, BrokerErrorKind.RATE_LIMITED):
                raise BrokerUnavailable(f"upstox: {error.describe()}")
            raise BrokerRejected(f"upstox: {error.describe()}")
        return _json.decode(response.content)

    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        body = {
            "quantity": int(fixed_to_decimal(request.quantity)),
            "product": self._product,
            "validity": "DAY",
            "price": fixed_to_decimal(request.price) if request.order_type == OrderType.LIMIT and request.price else 0,
            "tag": request.client_order_id,
            "instrument_token": request.symbol,
            "order_type": request.order_type,
            "transaction_type": request.side,
            "disclosed_quantity": 0,
            "trigger_price": 0,
            "is_amo": False,
            "slice": False,
        }
        payload = await self._request("POST", f"{self._order_url}/v3/order/place", json_body=_encode.encode(body))
        order_ids = (payload.get("data") or {}).get("order_ids") or []
        if not order_ids:
            raise BrokerUnavailable("upstox: placement answered without an order id")
        return BrokerOrder(
            client_order_id=request.client_order_id,
            exchange_order_id=str(order_ids[0]),
            symbol=request.symbol,
            side=request.side,
            order_type=request.order_type,
            quantity=request.quantity,
            price=request.price,
            status=OrderStatus.NEW,
        )

    async def cancel_order(self, *, client_order_id: str, exchange_order_id: str, symbol: str) -> BrokerOrder:
        await self._request("DELETE", f"{self._order_url}/v3/order/cancel", params={"order_id": exchange_order_id})
        return await self.fetch_order(client_order_id=client_order_id, symbol=symbol)

    async def _order_book(self) -> list[BrokerOrder]:
        if self._sandbox:
            raise BrokerUnavailable("upstox sandbox serves no order reads")
        payload = await self._request("GET", f"{self._api_url}/v2/order/retrieve-all")
        return [parse_order_row(row) for row in payload.get("data") or []]

    async def fetch_order(self, *, client_order_id: str, symbol: str) -> BrokerOrder:
        for order in await self._order_book():
            if order.client_order_id == client_order_id:
                return order
        raise OrderNotFound(client_order_id)

    async def open_orders(self, *, symbols: Sequence[str]) -> list[BrokerOrder]:
        return [
            order
            for order in await self._order_book()
            if order.status in (OrderStatus.SUBMITTED, OrderStatus.PARTIALLY_FILLED)
        ]

    async def fills(self, *, symbols: Sequence[str], since_ns: int) -> list[BrokerFill]:
        if self._sandbox:
            raise BrokerUnavailable("upstox sandbox serves no trade reads")
        import time

        payload = await self._request("GET", f"{self._api_url}/v2/order/trades/get-trades-for-day")
        now_ns = time.time_ns()
        return [parse_trade_row(row, received_ns=now_ns) for row in payload.get("data") or []]

    async def positions(self) -> list[BrokerPosition]:
        if self._sandbox:
            raise BrokerUnavailable("upstox sandbox serves no position reads")
        payload = await self._request("GET", f"{self._api_url}/v2/portfolio/short-term-positions")
        return parse_position_rows(payload.get("data") or [], product=self._product)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _factories(setup: BrokerSetup) -> dict[str, BrokerFactory]:
    """Brokers for the Upstox tokens recovery has configured (live = OAuth, sandbox = provisioned)."""
    if setup.auth_state is None:
        return {}
    values = setup.settings
    factories: dict[str, BrokerFactory] = {}
    for mode, kind, url, sandbox in (
        ("live", TokenKind.OAUTH, values["ORDERS_UPSTOX_ORDER_URL"], False),
        ("sandbox", TokenKind.SANDBOX, values["ORDERS_UPSTOX_SANDBOX_URL"], True),
    ):
        try:
            tokens = setup.auth_state.token_source(TokenKey("upstox", kind))
        except KeyError:
            continue
        factories[mode] = functools.partial(
            UpstoxBroker,
            tokens=tokens,
            order_url=url,
            api_url=values["ORDERS_UPSTOX_API_URL"],
            sandbox=sandbox,
            product=values["ORDERS_UPSTOX_PRODUCT"],
            timeout_s=values["ORDERS_BROKER_TIMEOUT_S"],
        )
    return factories


# Configured by tokens, not settings: a process without recovery's token state has none.
KIND = register_broker(
    BrokerKind(
        UpstoxBroker.name,
        "Upstox",
        settings=(
            "ORDERS_UPSTOX_ORDER_URL",
            "ORDERS_UPSTOX_SANDBOX_URL",
            "ORDERS_UPSTOX_API_URL",
            "ORDERS_UPSTOX_PRODUCT",
            "ORDERS_BROKER_TIMEOUT_S",
        ),
        factories=_factories,
    )
)
