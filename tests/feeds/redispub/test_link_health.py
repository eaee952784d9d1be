"""The publisher's health follows Redis both ways, and a dead Redis is logged once per interval.

A real closed port first, then a local TCP relay to the real Redis that is started and
stopped under the publisher, so the same client sees Redis vanish and come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
from collections.abc import AsyncIterator

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from redis.asyncio import Redis

from core.health import HealthBoard, Status
from core.log_throttle import FailureLog
from feeds.distribution.redispub.envelope import decode
from feeds.distribution.redispub.link_health import HEALTH_COMPONENT
from tests.feeds.factories import make_feed
from tests.feeds.redispub.conftest import FAST_OPTIONS, make_service, running
from tests.helpers import async_eventually

LOGGER = "feeds.distribution.redispub"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TcpRelay:
    """Forwards 127.0.0.1:<port> to the real Redis while started; refuses connections while stopped."""

    def __init__(self, target: tuple[str, int], port: int) -> None:
        self.target, self.port = target, port
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._pipes.add(task)
            task.add_done_callback(self._pipes.discard)

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        finally:
            sink.close()


@contextlib.asynccontextmanager
async def relay_client() -> AsyncIterator[tuple[TcpRelay, Redis]]:
    from urllib.parse import urlsplit

    real = urlsplit(settings.REDIS_URL)
    relay = TcpRelay((real.hostname or "127.0.0.1", real.port or 6379), _closed_port())
    client = Redis.from_url(f"redis://127.0.0.1:{relay.port}{real.path}", socket_connect_timeout=1)
    try:
        yield relay, client
    finally:
        await relay.stop()
        await client.aclose()


def _status(board: HealthBoard) -> Status | None:
    health = board.get(HEALTH_COMPONENT)
    return None if health is None else health.status


@pytest.mark.django_db(transaction=True)
async def test_a_closed_port_is_blocked_with_the_error_and_logged_once_then_counted(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    await database_sync_to_async(make_feed)("sim")
    client = Redis.from_url(f"redis://127.0.0.1:{_closed_port()}/0", socket_connect_timeout=1)
    board = HealthBoard()
    options = dataclasses.replace(FAST_OPTIONS, failure_log_s=0.2)
    service = await make_service(client, prefix, ["sim"], options=options, board=board)
    caplog.set_level(logging.INFO, logger=LOGGER)
    try:
        async with running(service):
            health = board.get(HEALTH_COMPONENT)
            assert health is not None and health.status is Status.BLOCKED
            assert "Redis unreachable" in health.reason and "ConnectionError" in health.reason
            assert not health.status.allows_readiness
            # The heartbeat keeps probing every 0.05 s: wait for two summary lines.
            await async_eventually(lambda: _summaries(caplog, 2), timeout_s=10)
    finally:
        await client.aclose()
    records = [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]
    assert sum(1 for r in records if r.exc_info) == 1  # one traceback, the first failure
    assert records[0].exc_info
    counted = [r.getMessage() for r in records[1:]]
    assert all("failed" in text and "more times in the last" in text for text in counted)
    total = service.link.failed_round_trips
    assert total > len(records)  # every failure was counted, far fewer were logged


async def _summaries(caplog: pytest.LogCaptureFixture, count: int) -> bool:
    return sum(1 for r in caplog.records if "more times in the last" in r.getMessage()) >= count


@pytest.mark.needs_redis
@pytest.mark.django_db(transaction=True)
async def test_the_publisher_is_healthy_again_when_redis_comes_back(
    prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    await database_sync_to_async(make_feed)("sim")
    board = HealthBoard()
    caplog.set_level(logging.INFO, logger=LOGGER)
    async with relay_client() as (relay, client):
        service = await make_service(client, prefix, ["sim"], board=board)
        async with running(service):
            assert _status(board) is Status.BLOCKED  # nothing listens on the port yet
            await relay.start()
            await async_eventually(lambda: _async(_status(board) is Status.HEALTHY), timeout_s=10)
            direct = Redis.from_url(settings.REDIS_URL)
            try:
                stored = await async_eventually(lambda: direct.get(f"{prefix}:simulated:venue:health"))
                assert decode(stored).instance_id == service.publisher.instance_id
                assert any("publishing again" in r.getMessage() for r in caplog.records)

                await relay.stop()  # Redis goes away under a running publisher
                await async_eventually(lambda: _async(_status(board) is Status.BLOCKED), timeout_s=10)
                await relay.start()
                await async_eventually(lambda: _async(_status(board) is Status.HEALTHY), timeout_s=10)
            finally:
                keys = [key async for key in direct.scan_iter(match=f"{prefix}:*")]
                if keys:
                    await direct.delete(*keys)
                await direct.aclose()


async def _async(value: bool) -> bool:
    return value


def test_failure_log_reports_the_first_in_full_then_one_line_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    failures = FailureLog(logging.getLogger("t.throttle"), "poll", interval_s=10, monotonic=lambda: now[0])
    caplog.set_level(logging.INFO, logger="t.throttle")
    for step in range(40):  # four a second for ten seconds
        now[0] = step * 0.25
        failures.failed(ConnectionRefusedError(f"attempt {step}"))
    now[0] = 10.0
    failures.failed(ConnectionRefusedError("attempt 40"))
    failures.succeeded()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "poll: ConnectionRefusedError('attempt 0')" and caplog.records[0].exc_info
    assert lines[1] == "poll: failed 40 more times in the last 10 s: ConnectionRefusedError('attempt 40')"
    assert lines[2] == "poll: working again after 41 failure(s)"
    assert len(lines) == 3
    failures.failed("again")  # a new run starts in full
    assert caplog.records[-1].getMessage() == "poll: again"
