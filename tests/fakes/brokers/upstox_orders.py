"""A fake Upstox order API on 127.0.0.1 (paths and envelopes of upstox-python-sdk 2.30.0).

    POST   /v3/order/place                      {"status":"success","data":{"order_ids":[id]},"metadata":{"latency":..}}
    DELETE /v3/order/cancel?order_id=           {"status":"success","data":{"order_id":id}}
    GET    /v2/order/retrieve-all               {"status":"success","data":[order book rows]}
    GET    /v2/order/trades/get-trades-for-day  {"status":"success","data":[trade rows]}
    GET    /v2/portfolio/short-term-positions   {"status":"success","data":[position rows]}, net
                                                `quantity` per instrument and product, from the trades

Only `valid_tokens` are accepted; any other bearer gets 401 with UDAPI100050.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

from aiohttp import web

from tests.fakes.brokers.threaded import ThreadedServer


class FakeUpstoxOrders:
    def __init__(self, valid_tokens: set[str]) -> None:
        self.valid_tokens = valid_tokens
        self._lock = threading.Lock()
        self._ids = itertools.count(250_101_000_000_001)
        self._trade_ids = itertools.count(80_000_001)
        self.orders: dict[str, dict[str, Any]] = {}
        self.trades: list[dict[str, Any]] = []
        self.place_bodies: list[dict[str, Any]] = []
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._server = ThreadedServer(app)

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def __enter__(self) -> FakeUpstoxOrders:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def execute(self, order_id: str, quantity: int, price: str) -> None:
        with self._lock:
            order = self.orders[order_id]
            order["filled_quantity"] += quantity
            order["pending_quantity"] = order["quantity"] - order["filled_quantity"]
            order["status"] = "complete" if order["pending_quantity"] == 0 else "open"
            self.trades.append(
                {
                    "exchange": "NSE",
                    "product": order["product"],
                    "trading_symbol": "NHPC",
                    "instrument_token": order["instrument_token"],
                    "order_type": order["order_type"],
                    "transaction_type": order["transaction_type"],
                    "quantity": quantity,
                    "exchange_order_id": f"X{order_id}",
                    "order_id": order_id,
                    "exchange_timestamp": "2026-11-30 10:15:02",
                    "average_price": json.loads(price),
                    "trade_id": str(next(self._trade_ids)),
                    "order_ref_id": "",
                    "order_timestamp": "2026-11-30 10:15:01",
                }
            )

    def _positions(self) -> list[dict[str, Any]]:
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for trade in self.trades:
            key = (trade["instrument_token"], trade["product"])
            row = rows.setdefault(
                key,
                {
                    "exchange": trade["exchange"],
                    "multiplier": 1.0,
                    "value": 0.0,
                    "pnl": 0.0,
                    "product": trade["product"],
                    "instrument_token": trade["instrument_token"],
                    "average_price": None,
                    "buy_value": 0.0,
                    "overnight_quantity": 0,
                    "day_buy_value": 0.0,
                    "day_buy_price": 0.0,
                    "overnight_buy_amount": 0.0,
                    "overnight_buy_quantity": 0,
                    "day_buy_quantity": 0,
                    "day_sell_value": 0.0,
                    "day_sell_price": 0.0,
                    "overnight_sell_amount": 0.0,
                    "overnight_sell_quantity": 0,
                    "day_sell_quantity": 0,
                    "quantity": 0,
                    "last_price": 0.0,
                    "unrealised": 0.0,
                    "realised": 0.0,
                    "sell_value": 0.0,
                    "trading_symbol": trade["trading_symbol"],
                    "tradingsymbol": trade["trading_symbol"],
                    "close_price": 0.0,
                    "buy_price": 0.0,
                    "sell_price": 0.0,
                },
            )
            if trade["transaction_type"] == "BUY":
                row["day_buy_quantity"] += trade["quantity"]
                row["quantity"] += trade["quantity"]
            else:
                row["day_sell_quantity"] += trade["quantity"]
                row["quantity"] -= trade["quantity"]
        return list(rows.values())

    async def _handle(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in self.valid_tokens:
            return _error(401, "UDAPI100050", "Invalid token used to access API")
        with self._lock:
            if request.method == "POST" and request.path == "/v3/order/place":
                body = json.loads(await request.read())
                self.place_bodies.append(body)
                order_id = str(next(self._ids))
                self.orders[order_id] = {
                    "exchange": "NSE",
                    "product": body["product"],
                    "price": body["price"],
                    "quantity": body["quantity"],
                    "status": "open",
                    "tag": body.get("tag"),
                    "instrument_token": body["instrument_token"],
                    "order_type": body["order_type"],
                    "validity": body["validity"],
                    "transaction_type": body["transaction_type"],
                    "average_price": 0,
                    "filled_quantity": 0,
                    "pending_quantity": body["quantity"],
                    "order_id": order_id,
                }
                return _ok({"order_ids": [order_id]}, metadata={"latency": 21})
            if request.method == "DELETE" and request.path == "/v3/order/cancel":
                order = self.orders.get(request.query.get("order_id", ""))
                if order is None or order["status"] != "open":
                    return _error(400, "UDAPI100010", "Order not found or not open")
                order["status"] = "cancelled"
                return _ok({"order_id": order["order_id"]}, metadata={"latency": 18})
            if request.method == "GET" and request.path == "/v2/order/retrieve-all":
                return _ok(list(self.orders.values()))
            if request.method == "GET" and request.path == "/v2/order/trades/get-trades-for-day":
                return _ok(list(self.trades))
            if request.method == "GET" and request.path == "/v2/portfolio/short-term-positions":
                return _ok(self._positions())
        return _error(404, "UDAPI100060", "Resource not Found.")


def _ok(data: Any, **extra: Any) -> web.Response:
    return web.Response(text=json.dumps({"status": "success", "data": data, **extra}), content_type="application/json")


def _error(status: int, code: str, message: str) -> web.Response:
    body = {
        "status": "error",
        "errors": [{"errorCode": code, "message": message, "propertyPath": None, "invalidValue": None}],
    }
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")
