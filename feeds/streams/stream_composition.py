"""Composition of one trade stream's runtime graph.

`build_trade_stream_runtime` only creates objects: it connects nothing, starts no
task, reads no settings and publishes nothing, so a graph can be built in a test as
safely as in production. Live acquisition and recovery share one consistency
controller, and it and the recovery coordinator share one state store.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from feeds.streams.consistency import DEFAULT_DEDUP_WINDOW, TradeStreamConsistencyController, TradeStreamStateStore
from feeds.streams.gap_recovery import (
    RecoveredSink,
    RuntimeRecoveryCoordinator,
    TradeHistorySource,
    TradeRecoveryController,
)
from feeds.streams.heartbeat_monitor import HeartbeatMonitor
from feeds.streams.reconnect import ConnectDispatcher, ReconnectCoordinator, SubscriptionManager
from feeds.streams.runtime_events import RuntimeEventPublisher
from feeds.streams.scheduler import RuntimeScheduler, Sleep
from feeds.streams.supervisor import RuntimeSupervisor
from feeds.streams.window_planner import DEFAULT_MAX_WINDOW_MS, TradeRecoveryWindowPlanner


@dataclass(frozen=True, slots=True)
class TradeStreamRuntimeComposition:
    """The assembled graph, handed explicitly to its lifecycle owner (not a registry)."""

    state_store: TradeStreamStateStore
    consistency: TradeStreamConsistencyController
    recovery_controller: TradeRecoveryController
    window_planner: TradeRecoveryWindowPlanner
    recovery_coordinator: RuntimeRecoveryCoordinator
    reconnect: ReconnectCoordinator
    heartbeat: HeartbeatMonitor
    supervisor: RuntimeSupervisor
    scheduler: RuntimeScheduler


def build_trade_stream_runtime(
    *,
    connection: ConnectDispatcher,
    subscriptions: SubscriptionManager,
    publisher: RuntimeEventPublisher,
    recovery_source: TradeHistorySource,
    heartbeat_timeout_s: float,
    scheduler_interval_s: float,
    max_window_ms: int = DEFAULT_MAX_WINDOW_MS,
    retention_ms: int | None = None,
    dedup_window: int = DEFAULT_DEDUP_WINDOW,
    recovered_sink: RecoveredSink | None = None,
    consistency: type[TradeStreamConsistencyController] = TradeStreamConsistencyController,
    clock: Callable[[], float] = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> TradeStreamRuntimeComposition:
    """Return a new graph; nothing in it runs until its owner starts it."""
    state_store = TradeStreamStateStore(dedup_window=dedup_window)
    consistency_controller = consistency(state_store)
    recovery_controller = TradeRecoveryController(recovery_source, consistency_controller, sink=recovered_sink)
    window_planner = TradeRecoveryWindowPlanner(max_window_ms)
    recovery_coordinator = RuntimeRecoveryCoordinator(
        state_store, window_planner, recovery_controller, retention_ms=retention_ms
    )
    reconnect = ReconnectCoordinator(connection, subscriptions, publisher)
    heartbeat = HeartbeatMonitor(heartbeat_timeout_s, publisher, clock=clock)
    supervisor = RuntimeSupervisor(heartbeat, reconnect)
    scheduler = RuntimeScheduler(heartbeat, supervisor, scheduler_interval_s, sleep=sleep)
    return TradeStreamRuntimeComposition(
        state_store=state_store,
        consistency=consistency_controller,
        recovery_controller=recovery_controller,
        window_planner=window_planner,
        recovery_coordinator=recovery_coordinator,
        reconnect=reconnect,
        heartbeat=heartbeat,
        supervisor=supervisor,
        scheduler=scheduler,
    )
