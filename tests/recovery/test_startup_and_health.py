"""Startup wiring, provisioned-token resume, datasource health, and the dependency rule."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from channels.db import database_sync_to_async

from core.health import HealthBoard, Status
from core.runtime.core import FatalError, Phase, Runtime, RuntimeContext, StartupTask
from core.runtime.startup_value import StartupValue
from recovery.coordinator import AuthState
from recovery.datasource import ResumableDataSource, TerminalFailureHealth
from recovery.models import BrokerToken
from recovery.startup import provisioned_keys, recovery_startup_tasks
from recovery.tokens import TokenKey, TokenKind, TokenState, TokenUnavailable
from tests.recovery.conftest import wait_until

ANALYTICS = TokenKey("upstox", TokenKind.ANALYTICS)
RECOVERY_DIR = Path(__file__).resolve().parents[2] / "recovery"


class FeedDataSource:
    """Stands in for the Upstox market feed: stops on an unavailable token, resumes on request."""

    name = "upstox-feed"

    def __init__(self, health: HealthBoard, auth_state: AuthState) -> None:
        self.health = TerminalFailureHealth(health, "feed:upstox")
        self.auth_state = auth_state
        self.running = False

    async def start(self, ctx: RuntimeContext) -> None:
        try:
            await self.auth_state.token_source(ANALYTICS).await_valid_token()
        except TokenUnavailable as exc:
            self.health.token_unavailable(exc)
            return
        self.running = True
        self.health.upstream_ready()

    async def resume_if_stopped(self) -> None:
        if not self.running:
            await self.start(self.ctx)


@pytest.mark.django_db(transaction=True)
async def test_runtime_resumes_the_feed_when_an_operator_writes_the_analytics_token_file(
    settings, tmp_path: Path, clock
) -> None:  # type: ignore[no-untyped-def]
    settings.RECOVERY_PROVISIONED_TOKENS = ["upstox/analytics"]
    settings.RECOVERY_PROVISIONED_TOKEN_DIR = str(tmp_path)
    feed_box: dict[str, FeedDataSource] = {}
    auth_state: StartupValue[AuthState] = StartupValue("token state")

    async def start_feed(ctx: RuntimeContext) -> None:  # what feeds will do in DATA_FLOW
        feed = FeedDataSource(ctx.health, auth_state.get())
        feed.ctx = ctx  # type: ignore[attr-defined]
        assert isinstance(feed, ResumableDataSource)
        auth_state.get().register_datasource(ANALYTICS, feed)
        await feed.start(ctx)
        feed_box["feed"] = feed

    runtime = Runtime([*recovery_startup_tasks(auth_state), StartupTask("start-feed", Phase.DATA_FLOW, start_feed)])
    run = asyncio.create_task(runtime.run())
    try:
        await wait_until(lambda: runtime.started)
        feed = feed_box["feed"]
        health = runtime.context.health
        # Missing file: the feed is DEGRADED with the reason, and readiness still allows it.
        feed_health = health.get("feed:upstox")
        assert feed_health is not None and feed_health.status is Status.DEGRADED and "missing" in feed_health.reason
        assert feed_health.status.allows_readiness
        assert not feed.running
        stored = await database_sync_to_async(BrokerToken.objects.get)(broker="upstox", kind="analytics")
        assert stored.state == TokenState.FAILED and stored.ciphertext == ""

        (tmp_path / "upstox-analytics.json").write_text(json.dumps({"access_token": "analytics-token-abc"}))
        await wait_until(lambda: feed.running)
        assert health.get("feed:upstox").status is Status.HEALTHY
        assert health.get(f"token:{ANALYTICS}").status is Status.HEALTHY
    finally:
        runtime.request_stop()
        assert await asyncio.wait_for(run, timeout=10) == 0


def test_terminal_failure_health_is_degraded_until_upstream_is_ready() -> None:
    board = HealthBoard()
    health = TerminalFailureHealth(board, "feed:upstox")
    health.upstream_ready()  # nothing to clear: no report yet
    assert board.get("feed:upstox") is None
    health.token_unavailable(TokenUnavailable(ANALYTICS, "token file missing"))
    reported = board.get("feed:upstox")
    assert reported is not None and reported.status is Status.DEGRADED and "token file missing" in reported.reason
    assert health.terminal_failure_message
    health.upstream_ready()
    assert board.get("feed:upstox").status is Status.HEALTHY and health.terminal_failure_message is None


def test_provisioned_token_settings_are_validated() -> None:
    assert provisioned_keys(["upstox/analytics", " upstox/sandbox"]) == [
        ANALYTICS,
        TokenKey("upstox", TokenKind.SANDBOX),
    ]
    for bad in (["upstox"], ["upstox/oauth"], ["/analytics"], ["upstox/other"]):
        with pytest.raises(FatalError):
            provisioned_keys(bad)


def test_recovery_imports_nothing_from_feeds_processor_or_orders() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+(feeds|processor|orders)\b", re.MULTILINE)
    offenders = [str(p.relative_to(RECOVERY_DIR)) for p in RECOVERY_DIR.rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []
