"""Provisioned token files: FAILED + poll when missing, rotation without restart, 401 handling, expiry identity."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from recovery.provisioned import (
    ProvisionedTokenInvalid,
    ProvisionedTokenManager,
    parse_provisioned_token,
    provisioned_token_path,
)
from recovery.tokens import TokenKey, TokenKind, TokenState, TokenStatus, TokenUnavailable
from tests.recovery.clocks import FakeClock
from tests.recovery.conftest import EVENING_IST, PollTicks, wait_until

ANALYTICS = TokenKey("upstox", TokenKind.ANALYTICS)


def write_token(path: Path, secret: str, expires_at: datetime | None = None) -> None:
    payload: dict[str, str] = {"access_token": secret}
    if expires_at is not None:
        payload["expires_at"] = expires_at.isoformat()
    path.write_text(json.dumps(payload))


@pytest.fixture
def ticks() -> PollTicks:
    return PollTicks()


@pytest.fixture
def recorded() -> list[TokenStatus]:
    return []


@pytest.fixture
def manager(tmp_path: Path, clock: FakeClock, ticks: PollTicks, recorded: list[TokenStatus]) -> ProvisionedTokenManager:
    async def record(status: TokenStatus, expires_at: datetime | None) -> None:
        recorded.append(status)

    return ProvisionedTokenManager(
        ANALYTICS,
        provisioned_token_path(tmp_path, ANALYTICS),
        clock=clock,
        poll_interval_s=30.0,
        poll_sleep=ticks,
        on_state=record,
    )


def test_parse_accepts_a_token_with_or_without_expiry_and_rejects_bad_files() -> None:
    token = parse_provisioned_token(b'{"access_token": "analytics-token-1"}', now=EVENING_IST)
    assert token.expires_at is None and token.access_token.reveal() == "analytics-token-1"
    later = (EVENING_IST + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    assert parse_provisioned_token(
        json.dumps({"access_token": "t-123456", "expires_at": later}).encode(), now=EVENING_IST
    ).expires_at
    for raw, reason in [
        (b"not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (b'{"access_token": ""}', "no access_token"),
        (b'{"access_token": "t", "expires_at": "yesterday"}', "unreadable expires_at"),
        (b'{"access_token": "t", "expires_at": "2026-01-01T00:00:00"}', "timezone"),
        (json.dumps({"access_token": "t", "expires_at": EVENING_IST.isoformat()}).encode(), "expired"),
    ]:
        with pytest.raises(ProvisionedTokenInvalid, match=reason):
            parse_provisioned_token(raw, now=EVENING_IST)


async def test_missing_file_fails_then_a_written_file_is_valid_within_one_poll(
    manager: ProvisionedTokenManager, ticks: PollTicks, recorded: list[TokenStatus]
) -> None:
    await manager.start()
    try:
        assert manager.status.state is TokenState.FAILED and "missing" in manager.status.reason
        with pytest.raises(TokenUnavailable):
            await manager.await_valid_token()
        await wait_until(lambda: ticks.waiting == 1)  # exactly one poller
        write_token(manager.path, "analytics-token-1")
        ticks.tick()  # one poll
        await wait_until(lambda: manager.status.state is TokenState.VALID)
        assert (await manager.await_valid_token()).reveal() == "analytics-token-1"
        assert manager.poller_running  # it keeps watching the file for the next rotation
        assert [s.state for s in recorded] == [TokenState.FAILED, TokenState.VALID]
    finally:
        await manager.stop()


async def test_a_401_with_an_unchanged_file_stays_failed_until_the_file_is_rotated(
    manager: ProvisionedTokenManager, ticks: PollTicks
) -> None:
    write_token(manager.path, "analytics-token-1")
    await manager.start()
    try:
        rejected = manager.status.fingerprint
        await manager.invalidate(rejected, "HTTP 401 UDAPI100050")
        assert manager.status.state is TokenState.FAILED and "rotate" in manager.status.reason
        await wait_until(lambda: ticks.waiting == 1)
        for _ in range(3):  # polls that find the same bytes change nothing
            ticks.tick()
            await wait_until(lambda: ticks.waiting == 1)
        assert manager.status.state is TokenState.FAILED
        write_token(manager.path, "analytics-token-2")
        ticks.tick()
        await wait_until(lambda: manager.status.state is TokenState.VALID)
        assert (await manager.await_valid_token()).reveal() == "analytics-token-2"
    finally:
        await manager.stop()


async def test_a_401_after_the_file_was_already_rotated_switches_to_the_new_token(
    manager: ProvisionedTokenManager,
) -> None:
    write_token(manager.path, "analytics-token-1")
    await manager.start()
    old = manager.status.fingerprint
    write_token(manager.path, "analytics-token-2")
    await manager.invalidate(old, "HTTP 401")
    assert manager.status.state is TokenState.VALID and manager.status.fingerprint != old
    await manager.invalidate(old, "a late 401 for the old token")  # ignored: not the token in use
    assert (await manager.await_valid_token()).reveal() == "analytics-token-2"
    await manager.stop()


async def test_expiry_fails_the_token_and_a_stale_timer_leaves_its_successor_alone(
    manager: ProvisionedTokenManager, clock: FakeClock, ticks: PollTicks
) -> None:
    first_expiry = clock.now() + timedelta(hours=1)
    write_token(manager.path, "analytics-token-1", first_expiry)
    await manager.start()
    try:
        await wait_until(lambda: clock.sleepers == 1)
        write_token(manager.path, "analytics-token-2", first_expiry + timedelta(days=1))
        await manager.invalidate(manager.status.fingerprint, "HTTP 401")  # picks up the rotated file
        clock.set(first_expiry + timedelta(minutes=1))
        await wait_until(lambda: clock.sleepers == 1)  # only the new token's timer is left
        assert manager.status.state is TokenState.VALID
        assert (await manager.await_valid_token()).reveal() == "analytics-token-2"
        clock.set(first_expiry + timedelta(days=1))
        await wait_until(lambda: manager.status.state is TokenState.FAILED)
        assert "expired" in manager.status.reason
        await wait_until(lambda: ticks.waiting == 1)  # and the poller watches for the next rotation
    finally:
        await manager.stop()


async def test_a_transient_read_error_clears_the_fingerprint_so_the_same_bytes_recover(
    manager: ProvisionedTokenManager, ticks: PollTicks
) -> None:
    write_token(manager.path, "analytics-token-1")
    await manager.start()
    try:
        await manager.invalidate(manager.status.fingerprint, "HTTP 401")
        assert manager.status.state is TokenState.FAILED and manager.last_fingerprint is not None
        content = manager.path.read_bytes()
        manager.path.unlink()
        manager.path.mkdir()  # reading a directory: an I/O error that is not "missing"
        await wait_until(lambda: ticks.waiting == 1)
        ticks.tick()
        await wait_until(lambda: manager.last_fingerprint is None and ticks.waiting == 1)
        assert "unreadable" in manager.status.reason
        manager.path.rmdir()
        manager.path.write_bytes(content)
        ticks.tick()
        await wait_until(lambda: manager.status.state is TokenState.VALID)
    finally:
        await manager.stop()


async def test_an_unparseable_file_is_failed_with_the_reason_and_no_token_in_it(
    manager: ProvisionedTokenManager,
) -> None:
    manager.path.write_text('{"access_token": "analytics-secret-xyz", "expires_at": "soon"}')
    await manager.start()
    assert manager.status.state is TokenState.FAILED
    assert "expires_at" in manager.status.reason and "analytics-secret-xyz" not in manager.status.reason
    await manager.stop()
