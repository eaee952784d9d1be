"""Whether THIS process can serve: the checks behind /readyz.

Readiness answers for the process that is asked (a load balancer pulls one replica,
not all of them): its database connection and, when the deployment has a shared channel
layer, a real round trip on it. The health of feeds, jobs and other processes is the
site-wide view at /internal/health and never fails a web process's readiness.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import connection

from core.health import Status


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    reason: str


def database_reachable() -> tuple[bool, str]:
    """Return (reachable, reason) for the default database, from one trivial query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True, "reachable"
    except Exception as exc:  # any driver error means "not reachable"
        return False, f"unreachable: {exc.__class__.__name__}"


async def _layer_round_trip(timeout_s: float) -> str:
    layer = get_channel_layer()
    if layer is None:
        raise LookupError("no channel layer configured")
    started = time.monotonic()
    async with asyncio.timeout(timeout_s):
        channel = await layer.new_channel("readyz.")
        await layer.send(channel, {"type": "readyz.ping"})
        message = await layer.receive(channel)
    if message.get("type") != "readyz.ping":
        raise ValueError(f"unexpected message {message.get('type')!r}")
    return f"round trip in {(time.monotonic() - started) * 1000:.0f} ms"


def channel_layer_check(*, timeout_s: float) -> Check | None:
    """Send one message to a fresh channel and read it back; None for a process-local layer.

    Synchronous (the probe runs outside any request's event loop); under ASGI the round
    trip runs on the server's loop, where the layer's connections live.
    """
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return None  # nothing shared to reach: websockets work whenever the process runs
    try:
        return Check("channel-layer", Status.HEALTHY, async_to_sync(_layer_round_trip)(timeout_s))
    except TimeoutError:
        return Check("channel-layer", Status.BLOCKED, f"no round trip within {timeout_s:g}s")
    except Exception as exc:  # any client error means "not reachable"
        return Check("channel-layer", Status.BLOCKED, f"unreachable: {exc.__class__.__name__}")


def process_checks(*, timeout_s: float) -> list[Check]:
    """Every check of this process: the database, then the channel layer when shared."""
    ok, reason = database_reachable()
    checks = [Check("database", Status.HEALTHY if ok else Status.BLOCKED, reason)]
    layer = channel_layer_check(timeout_s=timeout_s)
    if layer is not None:
        checks.append(layer)
    return checks
