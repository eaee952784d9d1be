"""Load the demo setup (idempotent). The demo password is printed once, when it is set."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import BaseCommand

from tradingsite.demo import DEMO_FEED, demo_load


class Command(BaseCommand):
    help = "Create the demo feed, instruments, strategies, paper account and user (safe to re-run)."

    def handle(self, *args: Any, **options: Any) -> None:
        result = demo_load(password=os.environ.get("DEMO_PASSWORD") or None)
        self.stdout.write(f"demo: feed {DEMO_FEED!r} with 5 instruments, 2 strategies, paper account ready")
        if result.password and "DEMO_PASSWORD" not in os.environ:
            self.stdout.write(
                self.style.WARNING(
                    f"demo: log in as {result.username!r} with password {result.password!r} "
                    "(shown once; reset with `manage.py changepassword demo`)"
                )
            )
        elif result.password:
            self.stdout.write(f"demo: user {result.username!r} password set from DEMO_PASSWORD")
        else:
            self.stdout.write(f"demo: user {result.username!r} exists; password unchanged")
