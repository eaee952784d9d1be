"""Startup wiring: the upstox venue authorizes with recovery's provisioned analytics token."""
from __future__ import annotations

import logging

from feeds.venues import upstox
from tradingsite.runtime.core import Phase, RuntimeContext, StartupTask

log = logging.getLogger(__name__)


def upstox_token_startup_tasks() -> list[StartupTask]:
    """Return the task that hands the analytics token source to the upstox venue.

    It runs after recovery loaded token state (phase 1) and before streams start
    (DATA_FLOW). Without a configured analytics token the venue keeps refusing to dial
    with a message that names the setting, and other venues are unaffected.
    """

    async def use_analytics_token(ctx: RuntimeContext) -> None:
        auth_state = ctx.resources.get("auth_state")
        if auth_state is None:
            return
        from recovery.tokens import TokenKey, TokenKind

        try:
            source = auth_state.token_source(TokenKey("upstox", TokenKind.ANALYTICS))
        except KeyError:
            # Worth a word only to a process that runs an upstox feed.
            if any(spec.venue == upstox.NAME for spec in ctx.resources.get("feed_specs", ())):
                log.warning("feed upstox: no analytics token configured; upstox feeds cannot dial")
            return
        upstox.VENUE.use_token_source(source)

    return [StartupTask("upstox-analytics-token", Phase.SUBSCRIPTIONS, use_analytics_token)]
