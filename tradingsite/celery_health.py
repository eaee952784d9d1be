"""The Celery worker and beat list themselves in the site-wide health view.

Neither runs the runtime's health reporter, so each starts a heartbeat thread
(core.process_heartbeat) once it is up and withdraws its rows at a clean stop. Beat's
row says whether this beat sends (holds the beat lease) or stands by, and for whom.
"""

from __future__ import annotations

import socket
from typing import Any

from celery import signals
from django.conf import settings

from core.health import HealthBoard, ProcessIdentity, Status
from core.process_heartbeat import ProcessHeartbeat

_heartbeats: dict[str, ProcessHeartbeat] = {}


def _start(role: str, label: str, board: HealthBoard | None = None) -> ProcessHeartbeat:
    if role in _heartbeats:
        return _heartbeats[role]
    identity = ProcessIdentity.of_this_process(role=role, label=label)
    if board is not None:
        board.process = identity
    heartbeat = ProcessHeartbeat(
        identity,
        interval_s=settings.HEALTH_REPORT_INTERVAL_S,
        stale_after_s=settings.HEALTH_STALE_AFTER_S,
        board=board,
    ).start()
    _heartbeats[role] = heartbeat
    return heartbeat


def stop(role: str) -> None:
    """Withdraw `role`'s rows (a clean stop); a no-op when it never started."""
    heartbeat = _heartbeats.pop(role, None)
    if heartbeat is not None:
        heartbeat.stop()


def beat_says(status: Status, reason: str) -> None:
    """Beat's own row: sending, or standby behind the holder (both healthy: a standby is by design)."""
    heartbeat = _heartbeats.get("beat")
    if heartbeat is None:
        board = HealthBoard()
        board.set("beat", status, reason)
        _start("beat", "beat", board)
    else:
        heartbeat.board.set("beat", status, reason)


def _on_worker_ready(sender: Any = None, **kwargs: Any) -> None:
    hostname = getattr(sender, "hostname", "") or socket.gethostname()
    _start("worker", f"worker:{hostname}")


def _on_worker_shutdown(**kwargs: Any) -> None:
    stop("worker")


def install() -> None:
    """Connect the handlers once (Celery's signals keep one receiver per dispatch uid)."""
    signals.worker_ready.connect(_on_worker_ready, weak=False, dispatch_uid="tradingsite.celery_health.ready")
    signals.worker_shutdown.connect(_on_worker_shutdown, weak=False, dispatch_uid="tradingsite.celery_health.stop")
