"""A process without a runtime (a web process, the Celery worker and beat) reports itself.

The runtime processes write their HealthBoard from the event loop (core.runtime.reporting).
A daphne web process or a Celery process has no such loop, so this thread writes its
board every interval instead: the site-wide health view lists every process of the
deployment, and one that dies shows as stale instead of silently missing.
"""

from __future__ import annotations

import logging
import threading

from django.db import close_old_connections, connection

from core import services
from core.health import HealthBoard, ProcessIdentity, Status
from core.log_throttle import FailureLog

log = logging.getLogger(__name__)


class ProcessHeartbeat:
    """Report `board` (by default one HEALTHY row named after the role) every `interval_s`."""

    def __init__(
        self,
        identity: ProcessIdentity,
        *,
        interval_s: float,
        stale_after_s: float,
        board: HealthBoard | None = None,
    ) -> None:
        self.identity = identity
        self.board = board or HealthBoard(identity)
        if board is None:
            self.board.set(identity.role or "process", Status.HEALTHY, "running")
        self.interval_s = interval_s
        self.stale_after_s = stale_after_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = FailureLog(log, f"health: {identity.role or 'process'} report", interval_s=60.0)

    def start(self) -> ProcessHeartbeat:
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.identity.role}", daemon=True)
        self._thread.start()
        return self

    def report_once(self) -> None:
        try:
            services.component_health_report(
                process=self.identity, health=self.board.snapshot(), default_stale_after_s=self.stale_after_s
            )
        except Exception as exc:
            # A database that is down is the database's alarm; keep beating until it is back.
            self._failures.failed(exc)
        else:
            self._failures.succeeded("reporting again")
        finally:
            close_old_connections()

    def stop(self, *, withdraw: bool = True) -> None:
        """End the beat; on a clean stop, remove the rows so nobody waits for them to go stale."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 5)
        if withdraw:
            try:
                services.component_health_withdraw(process=self.identity)
            except Exception as exc:
                log.warning("health: could not withdraw %s's rows at stop: %r", self.identity.role, exc)
            finally:
                connection.close()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.report_once()
                self._stop.wait(self.interval_s)
        finally:
            connection.close()
