"""Run the runtime for the named feed(s), without the web (scale-out: one process per venue).

A feed runs in exactly one process: the one holding its lease (feeds.streams.feed_lease).
A second runfeed for a held feed waits as a hot standby, saying who holds it, and takes
the feed over when the holder stops (at once) or dies (within FEED_LEASE_TTL_S).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.leases import describe_this_process
from core.runtime.signals import parse_feed_names, run_fast, stop_on_signals
from feeds.startup import feed_lease_task
from feeds.streams.feed_lease import FeedLeases, feed_lease_settings
from tradingsite.process_metrics import serve_process_metrics
from tradingsite.runtime.compose import build_hubs, build_runtime

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Run the feed runtime for the named feed(s): streams, fan-out and browser pushes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--feed", action="append", required=True, help="Feed name (repeat or comma-separate).")

    def handle(self, *args: Any, feed: list[str], **options: Any) -> None:
        names = parse_feed_names(feed)
        if not names:
            raise CommandError("--feed needs at least one feed name")
        try:
            lease_settings = feed_lease_settings()
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        serve_process_metrics("runfeed", settings.RUNTIME_METRICS_PORT, settings.RUNTIME_METRICS_ADDR)
        leases = FeedLeases(
            names, holder=describe_this_process(f"runfeed --feed {','.join(names)}"), lease_settings=lease_settings
        )
        hubs = build_hubs()
        runtime = build_runtime(role=f"feed:{','.join(names)}", feed_names=names, periodic_jobs=False, hubs=hubs)
        runtime.tasks.append(feed_lease_task(hubs.feeds, leases))

        def say(text: str) -> None:
            log.info("runfeed: %s", text)
            self.stdout.write(f"runfeed: {text}")
            self.stdout.flush()

        async def main() -> int:
            loop = asyncio.get_running_loop()
            stopped = asyncio.Event()
            stop_on_signals(loop, stopped.set)
            waiting = asyncio.ensure_future(leases.wait_until_held(report=say))
            stop_wait = asyncio.ensure_future(stopped.wait())
            await asyncio.wait({waiting, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
            if not waiting.done():  # stopped while on standby: nothing was started
                waiting.cancel()
                say("stopped while on standby")
                return 0
            waiting.result()
            if stopped.is_set():
                await leases.release()
                return 0
            say(f"holding {', '.join(leases.names)} as {leases.holder} (lease {lease_settings.ttl_s}s)")
            say(f"starting {', '.join(names)} on {type(loop).__module__.split('.')[0]}")
            stop_on_signals(loop, runtime.request_stop)
            code = await runtime.run()
            await leases.release()  # the runtime released it already unless it failed to start
            return code

        code = run_fast(main())
        if code:
            raise CommandError(f"runfeed stopped with exit code {code}; see the log above", returncode=code)
        self.stdout.write("runfeed: stopped")
