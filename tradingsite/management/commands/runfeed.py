"""Run the runtime for the named feed(s), without the web (scale-out: one process per venue)."""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.runtime.signals import parse_feed_names, run_fast, stop_on_signals
from tradingsite.runtime.compose import build_runtime


class Command(BaseCommand):
    help = "Run the feed runtime for the named feed(s): streams, fan-out and browser pushes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--feed", action="append", required=True, help="Feed name (repeat or comma-separate).")

    def handle(self, *args: Any, feed: list[str], **options: Any) -> None:
        names = parse_feed_names(feed)
        if not names:
            raise CommandError("--feed needs at least one feed name")
        if settings.RUNTIME_METRICS_PORT:
            from prometheus_client import start_http_server

            start_http_server(settings.RUNTIME_METRICS_PORT, addr=settings.RUNTIME_METRICS_ADDR)
        runtime = build_runtime(role=f"feed:{','.join(names)}", feed_names=names, periodic_jobs=False)

        async def main() -> int:
            loop = asyncio.get_running_loop()
            self.stdout.write(f"runfeed: starting {', '.join(names)} on {type(loop).__module__.split('.')[0]}")
            self.stdout.flush()
            stop_on_signals(loop, runtime.request_stop)
            return await runtime.run()

        code = run_fast(main())
        if code:
            raise CommandError(f"runfeed stopped with exit code {code}; see the log above", returncode=code)
        self.stdout.write("runfeed: stopped")
