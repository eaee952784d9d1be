"""Run the whole site in one process: web (daphne), runtime and, without Redis, periodic jobs."""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.leases import describe_this_process
from core.runtime.signals import parse_feed_names
from feeds.startup import feed_lease_task
from feeds.streams.feed_lease import FeedLeases, feed_lease_settings
from tradingsite.runtime.compose import build_hubs, build_runtime
from tradingsite.runtime.web import serve_with_runtime


class Command(BaseCommand):
    help = "Serve the dashboard and run the feeds and periodic jobs in this process (embedded default)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--feed", action="append", help="Run only these feeds (repeat or comma-separate); default all enabled."
        )

    def handle(self, *args: Any, host: str, port: int, feed: list[str] | None, **options: Any) -> None:
        if not 0 < port < 65536:
            raise CommandError(f"--port must be 1-65535, not {port}")
        from tradingsite.asgi import application

        periodic_in_process = not settings.REDIS_URL
        feed_names = parse_feed_names(feed) or None
        leases = self._take_feed_leases(feed_names)
        hubs = build_hubs()
        runtime = build_runtime(role="site", feed_names=feed_names, periodic_jobs=periodic_in_process, hubs=hubs)
        if leases is not None:
            runtime.tasks.append(feed_lease_task(hubs.feeds, leases))
        mode = (
            "embedded: periodic jobs in this process"
            if periodic_in_process
            else "Redis: periodic jobs need celery beat + worker"
        )
        self.stdout.write(
            f"tradingsite: serving http://{host}:{port}/ ({settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}, {mode})"
        )
        self.stdout.flush()
        try:
            code = serve_with_runtime(application, runtime, host=host, port=port)
        finally:
            if leases is not None:
                asyncio.run(leases.release())
        if code:
            raise CommandError(f"site stopped with exit code {code}; see the log above", returncode=code)
        self.stdout.write("tradingsite: stopped")

    def _take_feed_leases(self, feed_names: list[str] | None) -> FeedLeases | None:
        """Hold this site's feeds like any runfeed does, waiting while another process runs one.

        After a crash the dead process's lease runs out within FEED_LEASE_TTL_S; a second
        site or a runfeed for the same feed keeps this one waiting, saying who holds it.
        """
        from feeds.models import Feed

        names = feed_names or sorted(Feed.objects.filter(enabled=True).values_list("name", flat=True))
        if not names:
            return None
        try:
            lease_settings = feed_lease_settings()
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        leases = FeedLeases(names, holder=describe_this_process("runsite"), lease_settings=lease_settings)

        def say(text: str) -> None:
            self.stdout.write(f"tradingsite: {text}")
            self.stdout.flush()

        asyncio.run(leases.wait_until_held(report=say))
        return leases
