"""Names of the channel-layer groups that carry pushes to browsers.

Every app that pushes (prices, strategy rows, orders, prompts, controls) and the
dashboard websocket that joins the groups take the names from here, so a sender and
the socket cannot disagree on one.
"""

from __future__ import annotations

# Every logged-in browser: prices, strategy outputs and signals, global controls.
MARKET_GROUP = "market"


def user_group(user_id: int) -> str:
    """The group that carries one user's private events (orders, prompts, ledger)."""
    return f"user.{user_id}"
