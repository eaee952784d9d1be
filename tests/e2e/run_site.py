"""`manage.py runsite` for the browser tests, with recovery's wall clock moved to midday IST.

Upstox issues no tokens 03:30-08:00 IST (recovery.upstox); a browser test that submits
an auth code must not depend on the hour CI happens to run. Only recovery's injectable
clock moves (recovery.clock.system_clock); everything else keeps real time.

usage: python -m tests.e2e.run_site --port N
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, time


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    import django

    django.setup()
    from django.core.management import execute_from_command_line

    import recovery.clock
    from recovery.upstox import IST

    real_now = datetime.now(UTC)
    midday = datetime.combine(real_now.astimezone(IST).date(), time(12, 0), tzinfo=IST)
    offset = midday - real_now

    class MiddayClock(recovery.clock.SystemClock):
        def now(self) -> datetime:
            return datetime.now(UTC) + offset

    recovery.clock.system_clock = MiddayClock()
    execute_from_command_line(["manage.py", "runsite", *sys.argv[1:]])


if __name__ == "__main__":
    main()
