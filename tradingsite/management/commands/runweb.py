"""A web process for scale-out: daphne serving the site, no runtime, no periodic jobs."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.health import ProcessIdentity
from core.process_heartbeat import ProcessHeartbeat
from tradingsite.runtime.web import CLOSE_GRACE_S, ProxyHeaders, serve_web


class Command(BaseCommand):
    help = (
        "Serve the site with daphne (no runtime): as many as you like behind a proxy. "
        "SIGTERM closes websockets with 1001 (going away) before exiting."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--proxy-headers",
            action="store_true",
            help="Take the client address and scheme from X-Forwarded-For/-Port/-Proto (only behind a trusted proxy).",
        )
        parser.add_argument(
            "--close-grace", type=float, default=CLOSE_GRACE_S, help="Seconds to wait for websocket close handshakes."
        )

    def handle(self, *args: Any, host: str, port: int, proxy_headers: bool, close_grace: float, **options: Any) -> None:
        if not 0 < port < 65536:
            raise CommandError(f"--port must be 1-65535, not {port}")
        from tradingsite.asgi import application

        self.stdout.write(f"tradingsite: web on http://{host}:{port}/")
        self.stdout.flush()
        heartbeat = ProcessHeartbeat(
            ProcessIdentity.of_this_process(role="web", label=f"web:{port}"),
            interval_s=settings.HEALTH_REPORT_INTERVAL_S,
            stale_after_s=settings.HEALTH_STALE_AFTER_S,
        ).start()
        try:
            code = serve_web(
                application, host=host, port=port, proxy=ProxyHeaders() if proxy_headers else None, grace_s=close_grace
            )
        finally:
            heartbeat.stop()
        if code:
            raise CommandError(f"web stopped with exit code {code}; see the log above", returncode=code)
        self.stdout.write("tradingsite: web stopped")
