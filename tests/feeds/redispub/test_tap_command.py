"""`manage.py tap`: live messages for a pattern, with sequence gaps and restarts flagged."""

from __future__ import annotations

import asyncio
import io

import pytest
from django.core.management import CommandError, call_command
from redis.asyncio import Redis

from feeds.distribution.redispub.envelope import Envelope, Source
from feeds.distribution.redispub.publisher import Draft, RedisPublisher
from tests.helpers import async_eventually


def draft(key: str, price: str) -> Draft:
    return Draft(
        key,
        60_000,
        Envelope(
            venue="binance-usdm",
            market_type="perpetual",
            symbol="BTC-USDT",
            venue_symbol="BTCUSDT",
            channel="trades",
            source=Source.WS.value,
            status="HEALTHY",
            data={"price": price},
        ),
    )


async def start_tap(pattern: str, *options: str) -> tuple[asyncio.Task[None], io.StringIO]:
    out = io.StringIO()
    task = asyncio.create_task(asyncio.to_thread(call_command, "tap", pattern, *options, stdout=out))

    async def listening() -> bool:
        if task.done():
            task.result()  # raise the command's error here
        return "tap: listening" in out.getvalue()

    await async_eventually(listening, timeout_s=5)
    return task, out


@pytest.mark.needs_redis
async def test_tap_prints_messages_and_flags_a_gap_and_a_restart(redis: Redis, prefix: str) -> None:
    key = f"{prefix}:binance-usdm:perpetual:BTC-USDT:trades"
    task, out = await start_tap(f"{prefix}:*:trades", "--count", "4", "--timeout", "10")
    first = RedisPublisher(redis, instance_id="aaaaaaaaaaaa")
    await first.publish([draft(key, "1.5")])
    await first.publish([draft(key, "1.6")])
    first.sequences.next(key)  # seq 3 is lost on the way (pub/sub is fire-and-forget)
    await first.publish([draft(key, "1.7")])
    await first.publish([draft(f"{prefix}:binance-usdm:perpetual:BTC-USDT:health", "x")])  # not matched
    restarted = RedisPublisher(redis, instance_id="bbbbbbbbbbbb")
    await restarted.publish([draft(key, "1.8")])
    await asyncio.wait_for(task, 10)

    lines = out.getvalue().splitlines()
    flagged = [line for line in lines if line.startswith("!")]
    assert flagged == [
        f"! GAP {key}: seq 2 -> 4, 1 lost",
        f"! INSTANCE {key}: aaaaaaaaaaaa -> bbbbbbbbbbbb (publisher restarted)",
    ]
    printed = [line for line in lines if line.startswith(key)]
    assert [line.split()[1] for line in printed] == ["seq=1", "seq=2", "seq=4", "seq=1"]
    assert '{"price":"1.7"}' in printed[2] and "source=WS status=HEALTHY" in printed[2]
    assert lines[-1] == "tap: 4 messages, 1 gaps (1 lost), 1 instance changes"


@pytest.mark.needs_redis
async def test_tap_snapshot_prints_current_values_first(redis: Redis, prefix: str) -> None:
    key = f"{prefix}:binance-usdm:perpetual:BTC-USDT:trades"
    await RedisPublisher(redis, instance_id="cccccccccccc").publish([draft(key, "2.5")])
    task, out = await start_tap(f"{prefix}:*", "--snapshot", "--timeout", "0.3")
    await asyncio.wait_for(task, 10)
    assert f"= {key} seq=1 instance=cccccccccccc" in out.getvalue()


def test_tap_needs_redis(settings) -> None:
    settings.REDIS_URL = ""
    with pytest.raises(CommandError, match="REDIS_URL"):
        call_command("tap", "md:*", stdout=io.StringIO())
