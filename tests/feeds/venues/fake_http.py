"""A real HTTP server on 127.0.0.1 that serves canned venue responses and records requests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class CannedRoute:
    status: int
    body: bytes
    content_type: str = "application/json"


@dataclass
class FakeVenueHttp:
    """Routes (method, path) to canned responses; `requests` lists what arrived."""

    routes: dict[tuple[str, str], CannedRoute] = field(default_factory=dict)
    requests: list[web.Request] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    base_url: str = ""

    def serve(
        self, method: str, path: str, body: bytes, status: int = 200, content_type: str = "application/json"
    ) -> None:
        self.routes[(method, path)] = CannedRoute(status, body, content_type)

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append(request)
        self.bodies.append(await request.read())
        route = self.routes.get((request.method, request.path))
        if route is None:
            return web.Response(status=404, text="no such route")
        return web.Response(status=route.status, body=route.body, content_type=route.content_type)


async def running_fake_http() -> AsyncIterator[FakeVenueHttp]:
    fake = FakeVenueHttp()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake._handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    fake.base_url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()
