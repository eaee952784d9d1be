"""Reconciliation figures: one pass over accounts whose broker never answers next to a healthy one.

Run: .venv/bin/python bench/bench_reconcile.py   (a throwaway SQLite database under a temp dir)
Prints figures; asserts nothing about time. Two Upstox accounts point at a local server
that accepts connections and never answers (as a broker behind a pending login looks),
one paper account is healthy; each account's pass has a 3 s timeout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PASS_TIMEOUT_S = 3.0


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["VAR_DIR"] = tempfile.mkdtemp(prefix="bench-reconcile-")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    logging.disable(logging.WARNING)


async def bench(hung_accounts: int) -> None:
    from channels.db import database_sync_to_async

    from orders.brokers.registry import BrokerRegistry
    from orders.brokers.upstox import UpstoxBroker
    from orders.reconciliation import ReconcileResult, ReconcileTracker
    from orders.services import reconcile_all
    from tests.orders.factories import make_setup
    from tests.orders.test_reconcile_concurrent import SilentServer
    from tests.orders.test_upstox_broker import StaticTokens

    silent = SilentServer()
    healthy = await database_sync_to_async(make_setup)()
    for _ in range(hung_accounts):
        await database_sync_to_async(make_setup)(broker="upstox", mode="live")
    done_at: dict[int, float] = {}

    class StampingTracker(ReconcileTracker):
        def record(self, result: ReconcileResult) -> None:
            done_at[result.account_id] = time.monotonic()
            super().record(result)

    def upstox() -> UpstoxBroker:
        return UpstoxBroker(
            tokens=StaticTokens("t"), order_url=silent.url, api_url=silent.url, sandbox=False, timeout_s=120
        )

    registry = BrokerRegistry(factories={("upstox", "live"): upstox})
    started = time.monotonic()
    try:
        results = await reconcile_all(registry=registry, tracker=StampingTracker(), timeout_s=PASS_TIMEOUT_S)
    finally:
        await registry.close()
        silent.close()
    elapsed = time.monotonic() - started
    hung = sum(1 for result in results if result.skipped)
    print(
        f"{hung} hung + {len(results) - hung} healthy accounts, {PASS_TIMEOUT_S:.0f} s pass timeout: "
        f"whole pass {elapsed:.2f} s, newest healthy account done after {done_at[healthy.account.pk] - started:.2f} s "
        f"(one after another: {hung * PASS_TIMEOUT_S:.0f} s or more)"
    )


def main() -> None:
    _setup_django()
    for added in (2, 2):  # the accounts of the first run stay: 2 hung, then 4
        asyncio.run(bench(added))


if __name__ == "__main__":
    main()
