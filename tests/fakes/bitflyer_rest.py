"""A fake bitFlyer Lightning REST API: `GET /v1/executions` on 127.0.0.1.

As documented: `product_code`, `count` (default 100), `before` / `after` (exclusive
execution ids); the response is newest first, `exec_date` without "Z" (UTC):

    [{"id":39287,"side":"BUY","price":31690.0,"size":27.04,
      "exec_date":"2015-07-08T02:43:34.823","buy_child_order_acceptance_id":"JRF..",
      "sell_child_order_acceptance_id":"JRF.."}]
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True)
class Execution:
    id: int
    side: str  # BUY / SELL / ""
    price: str  # JSON number text, "13633748.0"
    size: str
    exec_date: str  # "2026-11-30T01:00:00.123"


class FakeBitflyerRest:
    def __init__(self, executions: list[Execution], *, product_code: str = "BTC_JPY") -> None:
        self.executions = sorted(executions, key=lambda e: e.id)
        self.product_code = product_code
        self.requests: list[dict[str, str]] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> FakeBitflyerRest:
        app = web.Application()
        app.router.add_get("/v1/executions", self._executions)
        app.router.add_get("/v1/getexecutions", self._executions)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _executions(self, request: web.Request) -> web.Response:
        query = dict(request.query)
        self.requests.append(query)
        if query.get("product_code") != self.product_code:
            return web.json_response({"status": -156, "error_message": "product_code is invalid"}, status=400)
        count = int(query.get("count", "100"))
        after = int(query["after"]) if "after" in query else None
        before = int(query["before"]) if "before" in query else None
        matching = [e for e in self.executions if (after is None or e.id > after) and (before is None or e.id < before)]
        newest_first = list(reversed(matching))[:count]
        body = ",".join(
            f'{{"id":{e.id},"side":"{e.side}","price":{e.price},"size":{e.size},"exec_date":"{e.exec_date}",'
            f'"buy_child_order_acceptance_id":"JRF{e.id}B","sell_child_order_acceptance_id":"JRF{e.id}S"}}'
            for e in newest_first
        )
        return web.Response(body=f"[{body}]", content_type="application/json")
