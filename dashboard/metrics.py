"""Prometheus metrics of the dashboard: its websockets (web processes) and control changes."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

WS_CONNECTIONS = Gauge("dashboard_websockets_open", "Open dashboard websockets", multiprocess_mode="livesum")
WS_BATCHES = Counter("dashboard_batches_sent_total", "Conflated batches sent to browsers")
WS_ROWS_CONFLATED = Counter("dashboard_rows_conflated_total", "Rows replaced by a newer one before sending")
WS_STALLED = Counter("dashboard_stalled_disconnects_total", "Browsers disconnected for not acknowledging")
CONTROL_CHANGES = Counter(
    "dashboard_control_changes_total", "Strategy, trade-setting and kill-switch changes", ["action"]
)
