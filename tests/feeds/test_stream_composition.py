"""Composition: one consistency controller and one store per stream, no side effects."""

from __future__ import annotations

from feeds.streams.heartbeat_monitor import HeartbeatState
from feeds.streams.reconnect import ReconnectState
from feeds.streams.stream_composition import build_trade_stream_runtime
from feeds.streams.supervisor import SupervisorState
from tests.feeds.doubles import EventLog, FakeClock, ListHistory, ScriptedConnection


async def _never_sleep(seconds: float) -> None:
    raise AssertionError("composition must not sleep")


def _graph(calls: list[str], events: EventLog, history: ListHistory):  # type: ignore[no-untyped-def]
    connection = ScriptedConnection(calls)
    return connection, build_trade_stream_runtime(
        connection=connection,
        subscriptions=connection,
        publisher=events,
        recovery_source=history,
        heartbeat_timeout_s=7.0,
        scheduler_interval_s=0.25,
        max_window_ms=1234,
        retention_ms=99_000,
        clock=FakeClock(),
        sleep=_never_sleep,
    )


def test_live_and_recovery_share_one_consistency_controller_and_one_state_store() -> None:
    _, graph = _graph([], EventLog(), ListHistory([]))
    assert graph.recovery_controller.consistency is graph.consistency
    assert graph.consistency.store is graph.state_store
    assert graph.recovery_coordinator._store is graph.state_store
    assert graph.recovery_coordinator._controller is graph.recovery_controller
    assert graph.recovery_coordinator._planner is graph.window_planner


def test_runtime_components_get_exactly_the_dependencies_the_factory_made_and_the_configuration() -> None:
    events, history = EventLog(), ListHistory([])
    connection, graph = _graph([], events, history)
    assert graph.supervisor._heartbeat is graph.heartbeat and graph.supervisor._reconnect is graph.reconnect
    assert graph.scheduler._heartbeat is graph.heartbeat and graph.scheduler._supervisor is graph.supervisor
    assert graph.reconnect._dispatcher is connection and graph.reconnect._subscriptions is connection
    assert graph.reconnect._publisher is events and graph.heartbeat._publisher is events
    assert graph.recovery_controller._source is history
    assert graph.heartbeat.timeout_s == 7.0 and graph.scheduler.interval_s == 0.25
    assert graph.window_planner.max_window_ms == 1234 and graph.recovery_coordinator._retention_ms == 99_000


def test_building_the_graph_connects_publishes_and_starts_nothing() -> None:
    calls: list[str] = []
    events = EventLog(calls)
    _, graph = _graph(calls, events, ListHistory([]))
    assert calls == [] and events.events == []
    assert graph.supervisor.state is SupervisorState.STOPPED
    assert graph.heartbeat.state is HeartbeatState.IDLE
    assert graph.reconnect.state is ReconnectState.DISCONNECTED and graph.reconnect.attempt == 0
    assert graph.scheduler.running is False
    assert graph.state_store.symbols() == []


def test_each_build_makes_a_new_graph() -> None:
    _, first = _graph([], EventLog(), ListHistory([]))
    _, second = _graph([], EventLog(), ListHistory([]))
    assert first.state_store is not second.state_store and first.consistency is not second.consistency
