"""Invariants of the stream runtime's parts: heartbeat, reconnect, supervisor, scheduler."""

from __future__ import annotations

import asyncio

import pytest

from feeds.streams.heartbeat_monitor import HeartbeatMonitor, HeartbeatState
from feeds.streams.reconnect import ReconnectCoordinator, ReconnectState
from feeds.streams.runtime_events import (
    HeartbeatTimeoutEvent,
    ReconnectCompletedEvent,
    ReconnectFailedEvent,
    ReconnectStartedEvent,
)
from feeds.streams.scheduler import RuntimeScheduler
from feeds.streams.supervisor import RuntimeSupervisor, SupervisorState
from tests.feeds.doubles import EventLog, FakeClock, ScriptedConnection

# --- heartbeat -------------------------------------------------------------------------


async def test_heartbeat_publishes_a_timeout_once() -> None:
    clock, events = FakeClock(), EventLog()
    heartbeat = HeartbeatMonitor(5.0, events, clock=clock)
    heartbeat.start()
    clock.advance(4.999)
    assert await heartbeat.check_timeout() is False
    clock.advance(0.001)
    assert await heartbeat.check_timeout() is True
    clock.advance(100)
    assert await heartbeat.check_timeout() is False
    assert events.events == [HeartbeatTimeoutEvent(elapsed_s=pytest.approx(5.0), timeout_s=5.0)]
    assert heartbeat.state is HeartbeatState.TIMED_OUT


async def test_heartbeat_activity_moves_the_boundary_and_rearms_after_a_timeout() -> None:
    clock, events = FakeClock(), EventLog()
    heartbeat = HeartbeatMonitor(5.0, events, clock=clock)
    heartbeat.start()
    clock.advance(4)
    heartbeat.record_activity()
    clock.advance(4)
    assert await heartbeat.check_timeout() is False
    clock.advance(1)
    assert await heartbeat.check_timeout() is True
    heartbeat.record_activity()
    assert heartbeat.state is HeartbeatState.MONITORING
    clock.advance(5)
    assert await heartbeat.check_timeout() is True
    assert len(events.events) == 2


async def test_heartbeat_is_passive_while_idle() -> None:
    clock, events = FakeClock(), EventLog()
    heartbeat = HeartbeatMonitor(1.0, events, clock=clock)
    heartbeat.record_activity()  # activity does not start monitoring
    clock.advance(10)
    assert await heartbeat.check_timeout() is False
    assert heartbeat.state is HeartbeatState.IDLE and events.events == []


async def test_heartbeat_passes_a_publisher_error_through_and_does_not_report_twice() -> None:
    clock, events = FakeClock(), EventLog()
    events.fail = True
    heartbeat = HeartbeatMonitor(1.0, events, clock=clock)
    heartbeat.start()
    clock.advance(1)
    with pytest.raises(RuntimeError, match="publisher down"):
        await heartbeat.check_timeout()
    assert await heartbeat.check_timeout() is False


# --- reconnect -------------------------------------------------------------------------


async def test_reconnect_connects_then_restores_subscriptions_publishing_started_and_completed() -> None:
    calls: list[str] = []
    events = EventLog(calls)
    reconnect = ReconnectCoordinator(ScriptedConnection(calls), ScriptedConnection(calls), events)
    await reconnect.reconnect()
    assert calls == ["publish:ReconnectStartedEvent", "connect", "restore", "publish:ReconnectCompletedEvent"]
    assert events.events == [ReconnectStartedEvent(1), ReconnectCompletedEvent(1)]
    assert reconnect.state is ReconnectState.CONNECTED


async def test_reconnect_does_not_restore_subscriptions_when_connect_fails() -> None:
    calls: list[str] = []
    events = EventLog(calls)
    connection = ScriptedConnection(calls)
    connection.connect_error = ConnectionRefusedError("refused")
    reconnect = ReconnectCoordinator(connection, connection, events)
    with pytest.raises(ConnectionRefusedError):
        await reconnect.reconnect()
    assert "restore" not in calls
    assert reconnect.state is ReconnectState.FAILED
    assert isinstance(events.events[-1], ReconnectFailedEvent) and events.events[-1].attempt == 1


async def test_reconnect_failure_in_restore_raises_the_original_error_and_counts_attempts() -> None:
    calls: list[str] = []
    connection = ScriptedConnection(calls)
    connection.restore_error = OSError("subscribe rejected")
    reconnect = ReconnectCoordinator(connection, connection, EventLog(calls))
    with pytest.raises(OSError, match="subscribe rejected"):
        await reconnect.reconnect()
    connection.restore_error = None
    await reconnect.reconnect()
    assert reconnect.attempt == 2 and reconnect.state is ReconnectState.CONNECTED


# --- supervisor ------------------------------------------------------------------------


class SlowReconnect:
    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()
        self.error: Exception | None = None

    async def reconnect(self) -> None:
        self.calls += 1
        await self.release.wait()
        if self.error:
            raise self.error


def _supervisor(clock: FakeClock | None = None) -> tuple[RuntimeSupervisor, HeartbeatMonitor, SlowReconnect]:
    heartbeat = HeartbeatMonitor(5.0, EventLog(), clock=clock or FakeClock())
    reconnect = SlowReconnect()
    return RuntimeSupervisor(heartbeat, reconnect), heartbeat, reconnect


async def test_supervisor_starts_the_heartbeat_and_runs() -> None:
    supervisor, heartbeat, _ = _supervisor()
    assert supervisor.state is SupervisorState.STOPPED
    supervisor.start()
    assert supervisor.state is SupervisorState.RUNNING and heartbeat.state is HeartbeatState.MONITORING


async def test_supervisor_never_runs_two_reconnects_at_once() -> None:
    supervisor, heartbeat, reconnect = _supervisor()
    supervisor.start()
    first = asyncio.create_task(supervisor.handle_heartbeat_timeout())
    await asyncio.sleep(0)
    assert supervisor.state is SupervisorState.RECONNECTING and heartbeat.state is HeartbeatState.IDLE
    assert await supervisor.handle_connection_lost() is False
    assert await supervisor.handle_heartbeat_timeout() is False
    reconnect.release.set()
    assert await first is True
    assert reconnect.calls == 1
    assert supervisor.state is SupervisorState.RUNNING and heartbeat.state is HeartbeatState.MONITORING


async def test_supervisor_fails_and_raises_when_the_reconnect_fails_then_retries() -> None:
    supervisor, heartbeat, reconnect = _supervisor()
    supervisor.start()
    reconnect.error = ConnectionRefusedError("refused")
    reconnect.release.set()
    with pytest.raises(ConnectionRefusedError):
        await supervisor.handle_heartbeat_timeout()
    assert supervisor.state is SupervisorState.FAILED and heartbeat.state is HeartbeatState.IDLE
    assert await supervisor.handle_heartbeat_timeout() is False  # only retry() leaves FAILED
    reconnect.error = None
    assert await supervisor.retry() is True
    assert supervisor.state is SupervisorState.RUNNING


async def test_supervisor_passes_activity_to_the_heartbeat_only_while_running() -> None:
    clock = FakeClock()
    supervisor, heartbeat, _ = _supervisor(clock)
    supervisor.notify_activity()
    assert heartbeat.state is HeartbeatState.IDLE
    supervisor.start()
    clock.advance(4)
    supervisor.notify_activity()
    clock.advance(4)
    assert await heartbeat.check_timeout() is False


async def test_supervisor_stopped_during_a_reconnect_stays_stopped() -> None:
    supervisor, heartbeat, reconnect = _supervisor()
    supervisor.start()
    task = asyncio.create_task(supervisor.handle_connection_lost())
    await asyncio.sleep(0)
    supervisor.stop()
    reconnect.release.set()
    await task
    assert supervisor.state is SupervisorState.STOPPED and heartbeat.state is HeartbeatState.IDLE


async def test_wait_settled_returns_the_outcome_of_the_reconnect_in_flight() -> None:
    supervisor, _, reconnect = _supervisor()
    supervisor.start()
    task = asyncio.create_task(supervisor.handle_connection_lost())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(supervisor.wait_settled())
    await asyncio.sleep(0)
    assert not waiter.done()
    reconnect.release.set()
    assert await waiter is SupervisorState.RUNNING
    await task


# --- scheduler -------------------------------------------------------------------------


class Ticks:
    """A sleep that counts calls and stops the scheduler after `limit` sleeps."""

    def __init__(self, limit: int, scheduler_ref: list[RuntimeScheduler], clock: FakeClock) -> None:
        self.slept: list[float] = []
        self.limit = limit
        self.ref = scheduler_ref
        self.clock = clock

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.advance(seconds)
        if len(self.slept) >= self.limit:
            self.ref[0].stop()
        await asyncio.sleep(0)


async def test_scheduler_checks_the_heartbeat_every_interval_and_reconnects_on_timeout() -> None:
    clock = FakeClock()
    supervisor, heartbeat, reconnect = _supervisor(clock)
    reconnect.release.set()
    ref: list[RuntimeScheduler] = []
    sleep = Ticks(12, ref, clock)
    scheduler = RuntimeScheduler(heartbeat, supervisor, 1.0, sleep=sleep)
    ref.append(scheduler)
    supervisor.start()
    await scheduler.start()
    assert sleep.slept == [1.0] * 12
    assert reconnect.calls == 2  # timed out at 5 s and again 5 s after the reconnect
    assert scheduler.running is False


async def test_scheduler_does_not_start_a_second_loop() -> None:
    clock = FakeClock()
    supervisor, heartbeat, _ = _supervisor(clock)
    gate = asyncio.Event()

    async def blocking_sleep(seconds: float) -> None:
        await gate.wait()

    scheduler = RuntimeScheduler(heartbeat, supervisor, 1.0, sleep=blocking_sleep)
    loop_task = asyncio.create_task(scheduler.start())
    await asyncio.sleep(0)
    assert scheduler.running
    await asyncio.wait_for(scheduler.start(), timeout=1)  # returns at once
    scheduler.stop()
    scheduler.stop()  # idempotent
    gate.set()
    await loop_task
    assert scheduler.running is False


async def test_scheduler_propagates_dependency_errors_and_resets_running() -> None:
    clock = FakeClock()
    supervisor, heartbeat, reconnect = _supervisor(clock)
    reconnect.error = ConnectionRefusedError("refused")
    reconnect.release.set()
    supervisor.start()

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    scheduler = RuntimeScheduler(heartbeat, supervisor, 1.0, sleep=sleep)
    with pytest.raises(ConnectionRefusedError):
        await scheduler.start()
    assert scheduler.running is False and supervisor.state is SupervisorState.FAILED


async def test_scheduler_run_once_is_one_step() -> None:
    clock = FakeClock()
    supervisor, heartbeat, reconnect = _supervisor(clock)
    reconnect.release.set()
    supervisor.start()
    scheduler = RuntimeScheduler(heartbeat, supervisor, 1.0)
    await scheduler.run_once()
    assert reconnect.calls == 0
    clock.advance(5)
    await scheduler.run_once()
    assert reconnect.calls == 1
