"""Binance USD-M futures orders through ccxt (`ccxt.async_support.binanceusdm`).

ccxt signs and sends; this adapter uses its raw endpoint methods (POST/GET/DELETE
/fapi/v1/order, GET /fapi/v1/openOrders, GET /fapi/v1/userTrades), whose responses
keep Binance's decimal strings (and GET /fapi/v3/positionRisk for the net position), so no price or quantity passes through float.
The sandbox switch is ccxt's demo trading (futures testnet is retired in ccxt);
`fapi_url` points every fapi call at another host (a local fake in tests).

Binance errors used: -2013 order does not exist, -2011 unknown order (cancel),
-4116 client order id duplicated; 5xx and timeouts leave the outcome unknown.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from core.fixed_point import fixed_to_str
from feeds.market import parse_fixed
from orders.brokers.base import (
    BrokerFill,
    BrokerOrder,
    BrokerPosition,
    BrokerRejected,
    BrokerUnavailable,
    DuplicateClientOrderId,
    OrderNotFound,
    OrderRequest,
)
from orders.brokers.kinds import BrokerFactory, BrokerKind, BrokerSetup, register_broker
from orders.models.lifecycle import OrderStatus, OrderType

STATUS = {
    "NEW": OrderStatus.SUBMITTED,
    "PARTIALLY_FILLED": OrderStatus.PARTIALLY_FILLED,
    "FILLED": OrderStatus.FILLED,
    "CANCELED": OrderStatus.CANCELED,
    "REJECTED": OrderStatus.REJECTED,
    "EXPIRED": OrderStatus.EXPIRED,
    "EXPIRED_IN_MATCH": OrderStatus.EXPIRED,
}
NOT_FOUND_CODES = {-2013, -2011}
DUPLICATE_CODE = -4116
_CODE = re.compile(r'"code"\s*:\s*(-?\d+)')


def _ccxt() -> Any:
    # ccxt takes most of a second to import: only a process that talks to Binance pays it.
    import ccxt.async_support

    return ccxt.async_support


def _code(exc: Exception) -> int | None:
    match = _CODE.search(str(exc))
    return int(match.group(1)) if match else None


def parse_order(raw: dict[str, Any]) -> BrokerOrder:
    """Return a Binance order object (strings for numbers) as a BrokerOrder. Pure."""
    price = raw.get("price") or "0"
    return BrokerOrder(
        client_order_id=raw["clientOrderId"],
        exchange_order_id=str(raw["orderId"]),
        symbol=raw["symbol"],
        side=raw["side"],
        order_type=raw["type"],
        quantity=parse_fixed(raw["origQty"]),
        price=parse_fixed(price) or None,
        status=STATUS.get(raw["status"], OrderStatus.SUBMITTED),
        filled_quantity=parse_fixed(raw.get("executedQty") or "0"),
    )


def parse_trade(raw: dict[str, Any]) -> BrokerFill:
    """Return a Binance userTrades row as a BrokerFill; trade ids are per symbol, so the id carries it. Pure."""
    return BrokerFill(
        exchange_trade_id=f"{raw['symbol']}:{raw['id']}",
        exchange_order_id=str(raw["orderId"]),
        symbol=raw["symbol"],
        side=raw["side"],
        quantity=parse_fixed(raw["qty"]),
        price=parse_fixed(raw["price"]),
        fee=parse_fixed(raw.get("commission") or "0"),
        ts_event=int(raw["time"]) * 1_000_000,
    )


def parse_position_risk(rows: list[dict[str, Any]]) -> list[BrokerPosition]:
    """Return positionRisk rows as one signed net per symbol (hedge mode's LONG and SHORT rows summed). Pure.

    `positionAmt` is signed already: negative for a short, in one-way and hedge mode alike.
    """
    net: dict[str, int] = {}
    for row in rows:
        net[row["symbol"]] = net.get(row["symbol"], 0) + parse_fixed(row.get("positionAmt") or "0")
    return [BrokerPosition(symbol, quantity) for symbol, quantity in sorted(net.items()) if quantity]


class BinanceUsdmBroker:
    name = "binance-usdm"

    def __init__(self, *, api_key: str, secret: str, demo: bool, fapi_url: str = "", timeout_s: float = 10.0) -> None:
        self._config = {"apiKey": api_key, "secret": secret, "timeout": int(timeout_s * 1000), "enableRateLimit": True}
        self._demo = demo
        self._fapi_url = fapi_url.rstrip("/")
        self._exchange: Any = None

    def _client(self) -> Any:
        # Built on first use: a constructor opens no session (NautilusTrader's adapter rule).
        if self._exchange is None:
            exchange = _ccxt().binanceusdm(dict(self._config))
            if self._demo:
                exchange.enable_demo_trading(True)
            if self._fapi_url:
                for key in ("fapiPublic", "fapiPrivate"):
                    exchange.urls["api"][key] = f"{self._fapi_url}/fapi/v1"
                exchange.urls["api"]["fapiPrivateV3"] = f"{self._fapi_url}/fapi/v3"
            self._exchange = exchange
        return self._exchange

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        ccxt = _ccxt()
        try:
            return await getattr(self._client(), method)(params)
        except ccxt.NetworkError as exc:  # timeouts, 5xx, rate limits: the outcome is unknown
            raise BrokerUnavailable(f"binance-usdm {method}: {type(exc).__name__}") from exc
        except ccxt.ExchangeError as exc:
            code = _code(exc)
            if code == DUPLICATE_CODE:
                raise DuplicateClientOrderId(str(params.get("newClientOrderId"))) from exc
            if code in NOT_FOUND_CODES:
                raise OrderNotFound(str(params.get("origClientOrderId") or params.get("orderId"))) from exc
            raise BrokerRejected(f"binance-usdm {method}: {exc}") from exc

    async def place_order(self, request: OrderRequest) -> BrokerOrder:
        params: dict[str, Any] = {
            "symbol": request.symbol,
            "side": request.side,
            "type": request.order_type,
            "quantity": fixed_to_str(request.quantity),
            "newClientOrderId": request.client_order_id,
        }
        if request.order_type == OrderType.LIMIT:
            assert request.price is not None
            params["price"] = fixed_to_str(request.price)
            params["timeInForce"] = "GTC"
        if request.reduce_only:
            params["reduceOnly"] = "true"
        return parse_order(await self._call("fapiPrivatePostOrder", params))

    async def cancel_order(self, *, client_order_id: str, exchange_order_id: str, symbol: str) -> BrokerOrder:
        return parse_order(
            await self._call("fapiPrivateDeleteOrder", {"symbol": symbol, "origClientOrderId": client_order_id})
        )

    async def fetch_order(self, *, client_order_id: str, symbol: str) -> BrokerOrder:
        return parse_order(
            await self._call("fapiPrivateGetOrder", {"symbol": symbol, "origClientOrderId": client_order_id})
        )

    async def open_orders(self, *, symbols: Sequence[str]) -> list[BrokerOrder]:
        # Without a symbol the call covers every symbol (weight 40): one call per pass.
        return [parse_order(raw) for raw in await self._call("fapiPrivateGetOpenOrders", {})]

    async def fills(self, *, symbols: Sequence[str], since_ns: int) -> list[BrokerFill]:
        fills: list[BrokerFill] = []
        for symbol in symbols:
            rows = await self._call(
                "fapiPrivateGetUserTrades", {"symbol": symbol, "startTime": since_ns // 1_000_000, "limit": 1000}
            )
            fills.extend(parse_trade(row) for row in rows)
        return fills

    async def positions(self) -> list[BrokerPosition]:
        return parse_position_risk(await self._call("fapiPrivateV3GetPositionRisk", {}))

    async def close(self) -> None:
        exchange, self._exchange = self._exchange, None
        if exchange is not None:
            await exchange.close()


def _factories(setup: BrokerSetup) -> dict[str, BrokerFactory]:
    values = setup.settings
    return {
        mode: functools.partial(
            BinanceUsdmBroker,
            api_key=values["ORDERS_BINANCE_API_KEY"],
            secret=values["ORDERS_BINANCE_API_SECRET"],
            demo=demo,
            fapi_url=values["ORDERS_BINANCE_FAPI_URL"],
            timeout_s=values["ORDERS_BROKER_TIMEOUT_S"],
        )
        for mode, demo in (("live", False), ("sandbox", True))
    }


# One exchange key serves both modes: sandbox is ccxt's demo trading on the same key.
KIND = register_broker(
    BrokerKind(
        BinanceUsdmBroker.name,
        "Binance USD-M",
        settings=(
            "ORDERS_BINANCE_API_KEY",
            "ORDERS_BINANCE_API_SECRET",
            "ORDERS_BINANCE_FAPI_URL",
            "ORDERS_BROKER_TIMEOUT_S",
        ),
        required=("ORDERS_BINANCE_API_KEY",),
        factories=_factories,
    )
)
