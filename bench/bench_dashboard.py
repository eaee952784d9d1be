"""Dashboard: how much the per-browser outbox folds, and what one browser receives.

1. Outbox fold: price rows for 50 instruments offered as fast as possible, a batch taken
   every 0.25 s of (virtual) time: rows folded per second, and rows in per row sent.
2. Socket path: the real DashboardConsumer on the in-memory channel layer, one browser
   that acknowledges every batch; a publisher sends price messages for 50 instruments as
   fast as it can: messages/s into the layer, batches/s and rows/s out to the browser,
   and the delay from the last send to the browser holding the last price.

The consumer reads which strategies a user may see from the database; this bench
measures the socket path only, so that one query is answered from memory.
Run: .venv/bin/python bench/bench_dashboard.py   (prints figures; asserts nothing about time)
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
os.environ.pop("REDIS_URL", None)
os.environ.setdefault("VAR_DIR", tempfile.mkdtemp(prefix="bench-dashboard-"))

INSTRUMENTS = 50


def price(n: int, i: int) -> dict[str, object]:
    return {
        "feed": "sim",
        "symbol": f"SYM{i}",
        "price": f"{100 + n % 7}.{i}",
        "open": "100",
        "volume": "1",
        "ticks": n,
        "ts_ms": n,
    }


def bench_outbox_fold() -> None:
    from dashboard.conflation import BrowserOutbox

    box = BrowserOutbox(interval_s=0.25, max_unacked=10**9)
    messages = [
        {"type": "market.prices", "prices": [price(n, (n * 5 + k) % INSTRUMENTS) for k in range(5)]}
        for n in range(200_000)
    ]
    rows_out = 0
    virtual_now = 0.0
    started = time.perf_counter()
    for n, message in enumerate(messages):
        box.offer(message)
        if n % 2_000 == 0:  # 2,000 messages per 0.25 s of virtual time = 40,000 rows/s of market
            virtual_now += 0.25
            for batch in box.take(virtual_now):
                rows_out += len(batch.get("prices", ()))
    elapsed = time.perf_counter() - started
    rows_in = len(messages) * 5
    print(
        f"outbox fold: {rows_in / elapsed:,.0f} rows/s folded; {rows_in:,} rows in, {rows_out:,} rows sent "
        f"({rows_in / max(rows_out, 1):,.0f} in per 1 sent, {INSTRUMENTS} instruments, 0.25 s interval)"
    )


async def bench_socket(messages: int = 20_000) -> None:
    import django

    django.setup()
    from channels.layers import get_channel_layer
    from channels.testing import WebsocketCommunicator
    from django.conf import settings
    from django.contrib.auth.models import User

    import dashboard.selectors
    from core.push_groups import MARKET_GROUP
    from dashboard.consumers import DashboardConsumer

    settings.DASHBOARD_BROWSER_INTERVAL_S = 0.25
    dashboard.selectors.visible_strategy_ids = lambda *, user_id: frozenset()  # socket path only (see docstring)
    user = User(pk=1, username="bench")
    browser = WebsocketCommunicator(DashboardConsumer.as_asgi(), "/ws/dashboard/")
    browser.scope["user"] = user
    connected, _ = await browser.connect()
    assert connected
    layer = get_channel_layer()
    batches = rows = 0
    done = asyncio.Event()
    finished_at = 0.0

    async def receive() -> None:
        nonlocal batches, rows, finished_at
        seq = 0
        while True:
            message = await browser.receive_json_from(timeout=30)
            if message["seq"] != seq:
                seq = message["seq"]
                batches += 1
                await browser.send_json_to({"type": "ack", "seq": seq})
            rows += len(message["prices"])
            if any(r["ticks"] == messages - 1 for r in message["prices"]):  # the last message sent
                finished_at = time.perf_counter()
                done.set()
                return

    receiver = asyncio.create_task(receive())
    started = time.perf_counter()
    for n in range(messages):
        await layer.group_send(MARKET_GROUP, {"type": "market.prices", "prices": [price(n, n % INSTRUMENTS)]})
    sent_at = time.perf_counter()
    await asyncio.wait_for(done.wait(), 60)
    await receiver
    await browser.disconnect()
    send_s = sent_at - started
    total_s = finished_at - started
    print(
        f"socket path: {messages / send_s:,.0f} messages/s into the layer; browser got {batches} batches, "
        f"{rows:,} rows in {total_s:.2f}s ({batches / total_s:.1f} batches/s, {rows / total_s:,.0f} rows/s); "
        f"last price reached the browser {1000 * (finished_at - sent_at):.0f} ms after the last send"
    )


def main() -> None:
    bench_outbox_fold()
    asyncio.run(bench_socket())


if __name__ == "__main__":
    main()
