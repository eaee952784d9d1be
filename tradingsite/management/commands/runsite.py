"""Run the whole site in one process: web (daphne), runtime and, without Redis, periodic jobs."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.runtime.signals import parse_feed_names
from tradingsite.runtime.compose import build_runtime
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
        runtime = build_runtime(
            role="site", feed_names=parse_feed_names(feed) or None, periodic_jobs=periodic_in_process
        )
        mode = (
            "embedded: periodic jobs in this process"
            if periodic_in_process
            else "Redis: periodic jobs need celery beat + worker"
        )
        self.stdout.write(
            f"tradingsite: serving http://{host}:{port}/ ({settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}, {mode})"
        )
        self.stdout.flush()
        code = serve_with_runtime(application, runtime, host=host, port=port)
        if code:
            raise CommandError(f"site stopped with exit code {code}; see the log above", returncode=code)
        self.stdout.write("tradingsite: stopped")
