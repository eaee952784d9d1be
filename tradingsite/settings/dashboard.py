"""The live dashboard's sockets: how far a browser may fall behind, how often it is updated."""

from __future__ import annotations

from tradingsite.settings.base import env

# A browser whose socket has this many pushes unacknowledged is stalled: it is
# disconnected instead of buffered for without bound.
DASHBOARD_MAX_UNACKED_PUSHES = env.int("DASHBOARD_MAX_UNACKED_PUSHES", default=40)
# Per browser, at most one price/output update per instrument per interval.
DASHBOARD_BROWSER_INTERVAL_S = env.float("DASHBOARD_BROWSER_INTERVAL_S", default=0.25)
