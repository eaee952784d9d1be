"""The production Upstox feed datasource through the whole runtime, against a local Upstox.

The runtime of `runfeed` (build_runtime) runs one upstox feed with the analytics token
as a provisioned file. A missing, expired or rejected token leaves the feed DEGRADED
with the terminal message (readiness kept) and stops it dialling; writing a token file
resumes it through the auth-state coordinator; rotating the file while the token is
VALID puts the new token on the next dial.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from core.health import Health, HealthBoard, Status
from core.runtime.core import Runtime
from feeds.models import Tick
from feeds.upstox_datasource import UpstoxDataSource
from recovery.tokens import TokenKey, TokenKind, TokenState
from tests.feeds.factories import make_feed
from tests.feeds.stream_harness import fast_runtime_streams
from tests.helpers import async_eventually
from tests.recovery.fake_upstox_feed import KEY, FakeUpstoxMarketFeed

pytestmark = pytest.mark.django_db(transaction=True)

ANALYTICS = TokenKey("upstox", TokenKind.ANALYTICS)
FEED = "up"


@pytest.fixture
async def fake_feed() -> AsyncIterator[FakeUpstoxMarketFeed]:
    async for fake in FakeUpstoxMarketFeed().serve():
        yield fake


@pytest.fixture
def token_dir(settings, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    # Long heartbeat: the fake goes quiet after its frames, and a silent-socket redial
    # would be a dial this test does not ask for.
    fast_runtime_streams(settings, heartbeat_timeout_s=60)
    settings.REDIS_URL = ""
    settings.FEED_REST_TIMEOUT_S = 2
    settings.HEALTH_REPORT_INTERVAL_S = 0.05
    settings.RECOVERY_PROVISIONED_TOKENS = ["upstox/analytics"]
    settings.RECOVERY_PROVISIONED_TOKEN_DIR = str(tmp_path)
    settings.RECOVERY_PROVISIONED_POLL_S = 0.05
    return tmp_path


def write_token(directory: Path, secret: str) -> None:
    # Written whole then renamed, as an operator's secret mount updates.
    staging = directory / ".upstox-analytics.json.tmp"
    staging.write_text(json.dumps({"access_token": secret}))
    staging.replace(directory / "upstox-analytics.json")


@asynccontextmanager
async def running_feed() -> AsyncIterator[tuple[Runtime, UpstoxDataSource]]:
    from tradingsite.runtime.compose import build_hubs, build_runtime

    hubs = build_hubs()
    runtime = build_runtime(role=f"feed:{FEED}", feed_names=[FEED], periodic_jobs=False, hubs=hubs)
    task = asyncio.create_task(runtime.run())
    try:
        await async_eventually(lambda: _true(runtime.started), timeout_s=20, interval_s=0.02)
        # The one the runtime registered with recovery: the production datasource, no stand-in.
        (datasource,) = hubs.auth_state.get().datasources[ANALYTICS]
        assert isinstance(datasource, UpstoxDataSource)
        yield runtime, datasource
    finally:
        runtime.request_stop()
        assert await asyncio.wait_for(task, 20) == 0


async def _true(value: object) -> bool:
    return bool(value)


def _health(board: HealthBoard, component: str) -> Health:
    health = board.get(component)
    assert health is not None, component
    return health


async def _status_is(board: HealthBoard, component: str, status: Status) -> Health | None:
    health = board.get(component)
    return health if health is not None and health.status is status else None


async def _ticks() -> int:
    return await database_sync_to_async(Tick.objects.count)()


async def _more_ticks_than(count: int) -> bool:
    return await _ticks() > count


async def _stays_parked(datasource: UpstoxDataSource, fake: FakeUpstoxMarketFeed, board: HealthBoard) -> None:
    """Over many backoff periods of the fast stream policy, nothing dials and nothing escalates."""
    failures, calls = datasource.terminal_failures, len(fake.authorizations)
    await asyncio.sleep(0.5)  # 10-50 redials' worth of backoff if anything were still dialling
    assert (datasource.terminal_failures, len(fake.authorizations)) == (failures, calls)
    assert datasource.stopped and datasource.waiting >= 1
    assert all(h.status is not Status.BLOCKED for name, h in board.snapshot().items() if name.startswith("feed:"))


async def test_a_missing_token_is_degraded_without_dialling_and_a_written_file_resumes_the_feed(
    fake_feed: FakeUpstoxMarketFeed, token_dir: Path
) -> None:
    await database_sync_to_async(make_feed)(FEED, (KEY,), venue="upstox", settings=fake_feed.settings())
    async with running_feed() as (runtime, datasource):
        board = runtime.context.health
        await async_eventually(lambda: _true(datasource.stopped and datasource.waiting), timeout_s=10)
        feed = _health(board, f"feed:{FEED}")
        assert feed.status is Status.DEGRADED and feed.status.allows_readiness
        assert "token unavailable" in feed.reason and "missing" in feed.reason
        assert _health(board, f"feed:{FEED}/token").status is Status.DEGRADED
        assert fake_feed.authorizations == []  # never dialled without a token
        await _stays_parked(datasource, fake_feed, board)

        write_token(token_dir, "analytics-token-1")
        await async_eventually(lambda: _true(fake_feed.subscriptions), timeout_s=10)
        assert fake_feed.authorizations == ["Bearer analytics-token-1"]
        assert datasource.resumes == 1 and not datasource.stopped
        await async_eventually(lambda: _status_is(board, f"feed:{FEED}", Status.HEALTHY), timeout_s=10)
        assert _health(board, f"feed:{FEED}/token").reason == "token accepted"
        await async_eventually(lambda: _more_ticks_than(0), timeout_s=10)


async def test_a_file_rotated_while_valid_is_used_and_a_rejected_token_stops_until_the_next_rotation(
    fake_feed: FakeUpstoxMarketFeed, token_dir: Path
) -> None:
    write_token(token_dir, "analytics-token-1")
    await database_sync_to_async(make_feed)(FEED, (KEY,), venue="upstox", settings=fake_feed.settings())
    async with running_feed() as (runtime, datasource):
        board = runtime.context.health
        manager = runtime_manager(datasource)
        await async_eventually(lambda: _status_is(board, f"feed:{FEED}", Status.HEALTHY), timeout_s=10)
        first = manager.status.fingerprint

        # Rotation while VALID: the manager takes the new token with no restart...
        write_token(token_dir, "analytics-token-2")
        await async_eventually(lambda: _true(manager.status.fingerprint != first), timeout_s=10)
        assert manager.status.state is TokenState.VALID
        # ...and the next dial authorizes with it.
        await fake_feed.drop_connections()
        await async_eventually(lambda: _true(fake_feed.subscriptions >= 2), timeout_s=10)
        assert fake_feed.authorizations[-1] == "Bearer analytics-token-2"

        # Upstox refuses the token in the file: FAILED, DEGRADED with the message, no retry loop.
        fake_feed.rejected.add("analytics-token-2")
        await fake_feed.drop_connections()
        await async_eventually(lambda: _true(datasource.stopped and datasource.waiting), timeout_s=10)
        feed = _health(board, f"feed:{FEED}")
        assert feed.status is Status.DEGRADED and "rotate the file" in feed.reason
        assert manager.status.state is TokenState.FAILED
        await _stays_parked(datasource, fake_feed, board)
        assert fake_feed.authorizations.count("Bearer analytics-token-2") == 2  # the good dial and the refused one

        write_token(token_dir, "analytics-token-3")
        await async_eventually(lambda: _true(fake_feed.subscriptions >= 3), timeout_s=10)
        assert fake_feed.authorizations[-1] == "Bearer analytics-token-3"
        await async_eventually(lambda: _status_is(board, f"feed:{FEED}", Status.HEALTHY), timeout_s=10)
        assert datasource.resumes == 1


def runtime_manager(datasource: UpstoxDataSource):  # type: ignore[no-untyped-def]
    return datasource._source  # the provisioned-token manager the runtime built


async def test_a_failure_the_coordinator_never_saw_still_resumes_the_stopped_datasource(tmp_path: Path) -> None:
    # The token stream keeps only the latest state: FAILED then VALID in one go reaches
    # a busy coordinator as VALID after VALID. The datasource stopped on that FAILED.
    from recovery.clock import current_clock
    from recovery.coordinator import AuthState, AuthStateCoordinator
    from recovery.provisioned import ProvisionedTokenManager, provisioned_token_path
    from recovery.tokens import TokenStatus, TokenUnavailable

    write_token(tmp_path, "analytics-token-1")
    manager = ProvisionedTokenManager(
        ANALYTICS, provisioned_token_path(tmp_path, ANALYTICS), clock=current_clock(), poll_interval_s=3600
    )
    await manager.start()
    board = HealthBoard()
    datasource = UpstoxDataSource(manager, board, [FEED])
    auth_state = AuthState(provisioned={ANALYTICS: manager})
    auth_state.register_datasource(ANALYTICS, datasource)
    coordinator = asyncio.create_task(AuthStateCoordinator(auth_state, board).run())
    try:
        await async_eventually(lambda: _status_is(board, f"token:{ANALYTICS}", Status.HEALTHY))
        valid = manager.status
        # No await between these: the coordinator cannot run in between.
        manager.state.set(TokenStatus(ANALYTICS, TokenState.FAILED, "file gone", "", valid.version + 1))
        with pytest.raises(TokenUnavailable):
            await datasource.await_valid_token()
        assert datasource.stopped and "file gone" in _health(board, f"feed:{FEED}").reason
        manager.state.set(valid)
        await async_eventually(lambda: _true(not datasource.stopped), timeout_s=5)
        assert datasource.resumes == 1
    finally:
        coordinator.cancel()
        await asyncio.gather(coordinator, return_exceptions=True)
        await manager.stop()
