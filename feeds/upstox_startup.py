"""Startup wiring: the upstox venue authorizes with recovery's provisioned analytics token,
through the feed's resumable datasource (feeds.upstox_datasource), which recovery's
auth-state coordinator resumes when the token is valid again."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from core.runtime.core import Phase, RuntimeContext, StartupTask
from core.runtime.startup_value import StartupValue
from feeds.startup import FeedHubs
from feeds.venues import upstox

if TYPE_CHECKING:
    from recovery.coordinator import AuthState

log = logging.getLogger(__name__)


def upstox_token_startup_tasks(feeds: FeedHubs, auth_state: StartupValue[AuthState]) -> list[StartupTask]:
    """Return the task that hands the analytics token source to the upstox venue.

    It runs after recovery loaded token state (phase 1) and before streams start
    (DATA_FLOW). Without a configured analytics token the venue keeps refusing to dial
    with a message that names the setting, and other venues are unaffected.
    """

    async def use_analytics_token(ctx: RuntimeContext) -> None:
        tokens = auth_state.get_or(None)
        if tokens is None:
            return
        from feeds.upstox_datasource import UpstoxDataSource
        from recovery.tokens import TokenKey, TokenKind

        try:
            source = tokens.token_source(TokenKey("upstox", TokenKind.ANALYTICS))
        except KeyError:
            # Worth a word only to a process that runs an upstox feed.
            if any(spec.venue == upstox.NAME for spec in feeds.specs.get_or([])):
                log.warning("feed upstox: no analytics token configured; upstox feeds cannot dial")
            return
        feed_names = [spec.name for spec in feeds.specs.get_or([]) if spec.venue == upstox.NAME]
        datasource = UpstoxDataSource(source, ctx.health, feed_names)
        upstox.VENUE.use_token_source(datasource, on_accepted=datasource.token_accepted)
        tokens.register_datasource(datasource.key, datasource)

    return [StartupTask("upstox-analytics-token", Phase.SUBSCRIPTIONS, use_analytics_token)]
