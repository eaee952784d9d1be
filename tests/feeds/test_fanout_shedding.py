"""A fan-out consumer that falls behind sheds batches: each is counted and shown on health and the dashboard."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client
from prometheus_client import REGISTRY

from core.health import HealthBoard, Status
from core.services import component_health_report
from feeds.distribution.fanout import FeedFanout, drain, health_component
from feeds.market import FeedData
from tests.orders.factories import tick


def _shed_total(consumer: str) -> float:
    return REGISTRY.get_sample_value("feed_consumer_overflow_total", {"consumer": consumer}) or 0.0


def _shedding(consumer: str) -> float | None:
    return REGISTRY.get_sample_value("feed_consumer_shedding", {"consumer": consumer})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _slow_consumer_sheds(health: HealthBoard, clock: Clock) -> tuple[FeedFanout, asyncio.Event, list[FeedData]]:
    fanout = FeedFanout(quiet_s=5.0, monotonic=clock)
    fanout.attach_health(health)
    release = asyncio.Event()
    seen: list[FeedData] = []

    async def slow(batch: FeedData) -> None:
        await release.wait()
        seen.append(batch)

    kept: list[FeedData] = []

    async def fast(batch: FeedData) -> None:
        kept.append(batch)

    tasks = [
        asyncio.create_task(drain("slow-test", fanout.subscribe("slow-test", capacity=2), slow)),
        asyncio.create_task(drain("fast-test", fanout.subscribe("fast-test", capacity=100), fast)),
    ]
    fanout.publish(FeedData("sim", (tick("100", "1"),)))
    await asyncio.sleep(0)  # the slow consumer takes the first batch and stalls on it
    for _ in range(9):
        fanout.publish(FeedData("sim", (tick("100", "1"),)))
    await asyncio.sleep(0)
    assert len(kept) == 10  # the other consumer loses nothing
    fanout.review()  # the runtime's watcher does this every second
    fanout._test_tasks = tasks  # type: ignore[attr-defined]  # kept alive until the test ends
    return fanout, release, seen


async def test_a_slow_consumer_sheds_with_a_count_and_is_degraded_until_it_keeps_up_again() -> None:
    health, clock = HealthBoard(), Clock()
    before = _shed_total("slow-test")
    fanout, release, seen = await _slow_consumer_sheds(health, clock)
    try:
        assert _shed_total("slow-test") - before == 7  # one taken, two queued, seven shed
        assert fanout.shedding() == {"slow-test": 7}
        shown = health.get(health_component("slow-test"))
        assert shown is not None and shown.status is Status.DEGRADED
        assert "shedding: 7 batches shed" in shown.reason and "queue full at 2" in shown.reason
        assert health.get(health_component("fast-test")) is None  # nothing to show for a consumer keeping up
        assert _shedding("slow-test") == 1

        clock.now += 2
        fanout.review()  # still within the quiet time: still degraded
        assert health.get(health_component("slow-test")).status is Status.DEGRADED  # type: ignore[union-attr]
        release.set()
        await asyncio.sleep(0.01)
        assert len(seen) == 3
        clock.now += 5
        fanout.review()
        shown = health.get(health_component("slow-test"))
        assert shown is not None and shown.status is Status.HEALTHY
        assert shown.reason == "keeping up again; 7 batches shed since start"
        assert _shedding("slow-test") == 0 and fanout.shedding() == {}
    finally:
        for task in fanout._test_tasks:  # type: ignore[attr-defined]
            task.cancel()


@pytest.mark.django_db(transaction=True)
async def test_the_dashboard_health_panel_shows_the_shedding_consumer() -> None:
    health, clock = HealthBoard(), Clock()
    fanout, _release, _ = await _slow_consumer_sheds(health, clock)
    try:

        def report_and_render() -> str:
            component_health_report(process=health.process, health=health.snapshot(), default_stale_after_s=60)
            staff = get_user_model().objects.create_user("operator", password="pw-123456", is_staff=True)
            client = Client()
            client.force_login(staff)
            response = client.get("/dashboard/panels/health/")
            assert response.status_code == 200
            return response.content.decode()

        page = await database_sync_to_async(report_and_render)()
        assert 'data-component="fanout:slow-test"' in page
        assert "shedding: 7 batches shed" in page
    finally:
        for task in fanout._test_tasks:  # type: ignore[attr-defined]
            task.cancel()


@pytest.mark.django_db(transaction=True)
async def test_batches_the_recorder_sheds_become_one_known_hole_per_symbol() -> None:
    from feeds.models import KnownHole
    from feeds.recording.shed_holes import REASON, ShedHoles
    from feeds.startup import _record_hole
    from tests.feeds.factories import make_feed

    await database_sync_to_async(make_feed)("sim", ("BTCUSDT", "ETHUSDT"))
    holes = ShedHoles(_record_hole)
    fanout = FeedFanout()
    fanout.subscribe("recorder-test", capacity=1, on_overflow=holes.add)
    fanout.publish(FeedData("sim", (tick("100", "1", ts_recv=1_000),)))  # queued
    fanout.publish(FeedData("sim", (tick("100", "1", ts_recv=2_000), tick("5", "1", symbol="ETHUSDT", ts_recv=2_500))))
    fanout.publish(FeedData("sim", (tick("100", "1", ts_recv=3_000),)))
    await holes.flush()
    rows = await database_sync_to_async(
        lambda: sorted(KnownHole.objects.values_list("venue_symbol", "start_ns", "end_ns", "reason"))
    )()
    assert rows == [("BTCUSDT", 2_000, 3_000, REASON), ("ETHUSDT", 2_500, 2_500, REASON)]
