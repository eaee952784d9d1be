"""Stream and recorder policy from Django settings (read when a runtime is built, not at import)."""

from __future__ import annotations

from django.conf import settings

from feeds.streams.feed_streams import FeedStreamSettings
from feeds.streams.supervised_stream import StreamPolicy
from feeds.streams.transport import TransportSettings


def feed_stream_settings() -> FeedStreamSettings:
    return FeedStreamSettings(
        policy=StreamPolicy(
            heartbeat_timeout_s=settings.FEED_HEARTBEAT_TIMEOUT_S,
            scheduler_interval_s=settings.FEED_HEARTBEAT_CHECK_S,
            max_connection_age_s=settings.FEED_MAX_CONNECTION_AGE_S or None,
            backoff_initial_s=settings.FEED_BACKOFF_INITIAL_S,
            backoff_max_s=settings.FEED_BACKOFF_MAX_S,
            breaker_threshold=settings.FEED_BREAKER_THRESHOLD,
            breaker_cooldown_s=settings.FEED_BREAKER_COOLDOWN_S,
            recovery_attempts=settings.FEED_RECOVERY_ATTEMPTS,
        ),
        transport=TransportSettings(
            open_timeout_s=settings.FEED_WS_OPEN_TIMEOUT_S,
            ping_interval_s=settings.FEED_WS_PING_INTERVAL_S,
            ping_timeout_s=settings.FEED_WS_PING_TIMEOUT_S,
        ),
        rest_timeout_s=settings.FEED_REST_TIMEOUT_S,
    )
