"""A fake Binance USD-M order API: the signed /fapi/v1 order endpoints ccxt calls.

    POST   /fapi/v1/order       newClientOrderId, symbol, side, type, quantity[, price, timeInForce, reduceOnly]
    GET    /fapi/v1/order       symbol + origClientOrderId | orderId      (-2013 Order does not exist.)
    DELETE /fapi/v1/order       symbol + origClientOrderId | orderId      (-2011 Unknown order sent.)
    GET    /fapi/v1/openOrders  [symbol]
    GET    /fapi/v1/userTrades  symbol[, startTime, limit]
    GET    /fapi/v3/positionRisk [symbol]  one-way mode rows (positionSide BOTH): signed positionAmt
                                          of every symbol with a position or an open order

Requests must carry X-MBX-APIKEY and a valid HMAC-SHA256 `signature` over the rest of
the parameters, as Binance checks. A second order with a client id already used gets
-4116 "ClientOrderId is duplicated.". Orders rest until the test executes them
(`execute`); `place_requests` counts every POST, accepted or not; `fail_places`
answers the next N placements with HTTP 503 (outcome unknown to the client);
`unavailable` names endpoints (e.g. "openOrders", "userTrades", "positionRisk", "order")
that answer every GET with 503; `trade_outside` books exposure no order of ours explains
(a trade made in the venue's own app, a liquidation).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from tests.fakes.brokers.threaded import ThreadedServer

API_KEY = "fake-key"
API_SECRET = "fake-secret"


@dataclass
class _Order:
    order_id: int
    client_order_id: str
    symbol: str
    side: str
    type: str
    quantity: Decimal
    price: Decimal
    status: str = "NEW"
    executed: Decimal = Decimal(0)
    update_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def as_json(self) -> dict[str, Any]:
        return {
            "orderId": self.order_id,
            "symbol": self.symbol,
            "status": self.status,
            "clientOrderId": self.client_order_id,
            "price": str(self.price),
            "avgPrice": "0",
            "origQty": str(self.quantity),
            "executedQty": str(self.executed),
            "cumQuote": "0",
            "timeInForce": "GTC",
            "type": self.type,
            "reduceOnly": False,
            "side": self.side,
            "positionSide": "BOTH",
            "updateTime": self.update_ms,
        }


class FakeBinanceOrders:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(8_000_000_001)
        self._trade_ids = itertools.count(5_000_001)
        self.orders: dict[str, _Order] = {}
        self.trades: list[dict[str, Any]] = []
        self.place_requests = 0
        self.fail_places = 0
        self.unavailable: set[str] = set()
        self.outside: dict[str, Decimal] = {}
        app = web.Application()
        app.router.add_route("*", "/fapi/v1/{endpoint}", self._handle)
        app.router.add_route("*", "/fapi/v3/{endpoint}", self._handle)
        self._server = ThreadedServer(app)

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def start(self) -> FakeBinanceOrders:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> FakeBinanceOrders:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- test controls ---------------------------------------------------------------

    def execute(self, client_order_id: str, quantity: str, price: str, commission: str = "0") -> None:
        """Fill part of a resting order, as the matching engine would."""
        with self._lock:
            order = self.orders[client_order_id]
            qty = Decimal(quantity)
            order.executed += qty
            order.status = "FILLED" if order.executed == order.quantity else "PARTIALLY_FILLED"
            self.trades.append(
                {
                    "buyer": order.side == "BUY",
                    "commission": commission,
                    "commissionAsset": "USDT",
                    "id": next(self._trade_ids),
                    "maker": False,
                    "orderId": order.order_id,
                    "price": price,
                    "qty": quantity,
                    "quoteQty": str(qty * Decimal(price)),
                    "realizedPnl": "0",
                    "side": order.side,
                    "positionSide": "BOTH",
                    "symbol": order.symbol,
                    "time": int(time.time() * 1000),
                }
            )

    def trade_outside(self, symbol: str, quantity: str) -> None:
        """Change the account's position by a signed quantity without any order of ours."""
        with self._lock:
            self.outside[symbol] = self.outside.get(symbol, Decimal(0)) + Decimal(quantity)

    def net_position(self, symbol: str) -> Decimal:
        with self._lock:
            return self._net()[symbol] if symbol in self._net() else Decimal(0)

    def _net(self) -> dict[str, Decimal]:
        net = dict(self.outside)
        for trade in self.trades:
            sign = 1 if trade["side"] == "BUY" else -1
            net[trade["symbol"]] = net.get(trade["symbol"], Decimal(0)) + sign * Decimal(trade["qty"])
        return net

    def _position_rows(self, symbol: str | None) -> list[dict[str, Any]]:
        net = self._net()
        working = {o.symbol for o in self.orders.values() if o.status in ("NEW", "PARTIALLY_FILLED")}
        rows = []
        for name in sorted(set(net) | working):
            if symbol not in (None, name) or (not net.get(name) and name not in working):
                continue
            amount = net.get(name, Decimal(0))
            rows.append(
                {
                    "symbol": name,
                    "positionSide": "BOTH",
                    "positionAmt": str(amount),
                    "entryPrice": "0",
                    "breakEvenPrice": "0",
                    "markPrice": "0",
                    "unRealizedProfit": "0",
                    "liquidationPrice": "0",
                    "isolatedMargin": "0",
                    "notional": "0",
                    "marginAsset": "USDT",
                    "isolatedWallet": "0",
                    "initialMargin": "0",
                    "maintMargin": "0",
                    "positionInitialMargin": "0",
                    "openOrderInitialMargin": "0",
                    "adl": 0,
                    "bidNotional": "0",
                    "askNotional": "0",
                    "updateTime": int(time.time() * 1000),
                }
            )
        return rows

    # ---- the API ---------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        raw_query = request.query_string
        raw_body = (await request.read()).decode()
        if request.headers.get("X-MBX-APIKEY") != API_KEY:
            return _error(401, -2015, "Invalid API-key, IP, or permissions for action.")
        payload = raw_query if raw_query else raw_body
        if raw_query and raw_body:
            payload = raw_query + raw_body
        unsigned, _, signature = payload.rpartition("&signature=")
        expected = hmac.new(API_SECRET.encode(), unsigned.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(signature, expected):
            return _error(400, -1022, "Signature for this request is not valid.")
        params = dict(parse_qsl(unsigned))
        endpoint = request.match_info["endpoint"]
        if request.method == "GET" and endpoint in self.unavailable:
            return web.Response(status=503, text="Service Unavailable")
        with self._lock:
            if endpoint == "positionRisk" and request.path.startswith("/fapi/v3/"):
                return _ok(self._position_rows(params.get("symbol")))
            if endpoint == "order" and request.method == "POST":
                return self._place(params)
            if endpoint == "order" and request.method == "GET":
                order = self._find(params)
                return _ok(order.as_json()) if order else _error(400, -2013, "Order does not exist.")
            if endpoint == "order" and request.method == "DELETE":
                order = self._find(params)
                if order is None or order.status not in ("NEW", "PARTIALLY_FILLED"):
                    return _error(400, -2011, "Unknown order sent.")
                order.status = "CANCELED"
                return _ok(order.as_json())
            if endpoint == "openOrders":
                return _ok(
                    [
                        o.as_json()
                        for o in self.orders.values()
                        if o.status in ("NEW", "PARTIALLY_FILLED") and params.get("symbol") in (None, o.symbol)
                    ]
                )
            if endpoint == "userTrades":
                since = int(params.get("startTime", 0))
                return _ok([t for t in self.trades if t["symbol"] == params["symbol"] and t["time"] >= since])
        return _error(404, -1000, f"no fake for {request.method} {endpoint}")

    def _place(self, params: dict[str, str]) -> web.Response:
        self.place_requests += 1
        if self.fail_places:
            self.fail_places -= 1
            return web.Response(status=503, text="Service Unavailable")
        client_id = params["newClientOrderId"]
        if client_id in self.orders:
            return _error(400, -4116, "ClientOrderId is duplicated.")
        order = _Order(
            order_id=next(self._ids),
            client_order_id=client_id,
            symbol=params["symbol"],
            side=params["side"],
            type=params["type"],
            quantity=Decimal(params["quantity"]),
            price=Decimal(params.get("price", "0")),
        )
        self.orders[client_id] = order
        return _ok(order.as_json())

    def _find(self, params: dict[str, str]) -> _Order | None:
        if "origClientOrderId" in params:
            return self.orders.get(params["origClientOrderId"])
        order_id = int(params.get("orderId", 0))
        return next((o for o in self.orders.values() if o.order_id == order_id), None)


def _ok(body: Any) -> web.Response:
    return web.Response(text=json.dumps(body), content_type="application/json")


def _error(status: int, code: int, msg: str) -> web.Response:
    return web.Response(status=status, text=json.dumps({"code": code, "msg": msg}), content_type="application/json")
