"""Market data: supervised streams and gap recovery, the tick recorder, prices on Redis.

docs/streams.md and docs/redis-publisher.md describe each knob's effect.
"""

from __future__ import annotations

from tradingsite.settings.base import env

# Supervised streams. A stream with no frame for this long is redialled (its gap then
# recovered over REST).
FEED_HEARTBEAT_TIMEOUT_S = env.float("FEED_HEARTBEAT_TIMEOUT_S", default=60.0)
FEED_HEARTBEAT_CHECK_S = env.float("FEED_HEARTBEAT_CHECK_S", default=1.0)
# Websocket keepalive: a connection with no pong within ping interval + timeout is dropped.
FEED_WS_PING_INTERVAL_S = env.float("FEED_WS_PING_INTERVAL_S", default=10.0)
FEED_WS_PING_TIMEOUT_S = env.float("FEED_WS_PING_TIMEOUT_S", default=10.0)
FEED_WS_OPEN_TIMEOUT_S = env.float("FEED_WS_OPEN_TIMEOUT_S", default=10.0)
# Planned redial age; 0 = the venue's maximum connection age less 10 minutes.
FEED_MAX_CONNECTION_AGE_S = env.float("FEED_MAX_CONNECTION_AGE_S", default=0.0)
FEED_BACKOFF_INITIAL_S = env.float("FEED_BACKOFF_INITIAL_S", default=0.5)
FEED_BACKOFF_MAX_S = env.float("FEED_BACKOFF_MAX_S", default=30.0)
FEED_BREAKER_THRESHOLD = env.int("FEED_BREAKER_THRESHOLD", default=10)
FEED_BREAKER_COOLDOWN_S = env.float("FEED_BREAKER_COOLDOWN_S", default=60.0)
# Failed gap recoveries in a row before the gap is recorded as a known hole.
FEED_RECOVERY_ATTEMPTS = env.int("FEED_RECOVERY_ATTEMPTS", default=5)
FEED_REST_TIMEOUT_S = env.float("FEED_REST_TIMEOUT_S", default=10.0)
# Share of each venue's published rate limits this process may use, and how long a call
# may wait for a token before it is refused (fail closed).
FEED_RATE_LIMIT_FRACTION = env.float("FEED_RATE_LIMIT_FRACTION", default=0.5)
FEED_RATE_LIMIT_MAX_WAIT_S = env.float("FEED_RATE_LIMIT_MAX_WAIT_S", default=5.0)

# Feed ownership (runfeed): a feed runs in the one process holding its lease. The holder
# renews every RENEW_S; a standby polls every POLL_S and takes over once the lease is
# released (clean stop) or TTL_S after the holder's last renewal (killed, paused, cut off).
FEED_LEASE_TTL_S = env.float("FEED_LEASE_TTL_S", default=15.0)
FEED_LEASE_RENEW_S = env.float("FEED_LEASE_RENEW_S", default=5.0)
FEED_LEASE_POLL_S = env.float("FEED_LEASE_POLL_S", default=1.0)

# The tick recorder.
RECORDER_ENABLED = env.bool("RECORDER_ENABLED", default=True)
RECORDER_BATCH_SIZE = env.int("RECORDER_BATCH_SIZE", default=5000)
RECORDER_FLUSH_INTERVAL_S = env.float("RECORDER_FLUSH_INTERVAL_S", default=0.5)
# Ticks held in memory while the database is slow or down; beyond it they are dropped and counted.
RECORDER_CAPACITY = env.int("RECORDER_CAPACITY", default=200_000)
# On PostgreSQL the recorder's COPY runs in its own process (the copy worker), off the
# feed's GIL; off: a thread of the feed's process writes one batch at a time.
RECORDER_WRITER_PROCESS = env.bool("RECORDER_WRITER_PROCESS", default=True)

# Market data on Redis, off without REDIS_URL. Keys: {prefix}:{venue}:{market_type}:{symbol}:{channel}.
MARKET_DATA_PREFIX = env.str("MARKET_DATA_PREFIX", default="md")
# A key lives cadence x multiplier; cadence per "channel=s" or "venue:channel=s" override.
MARKET_DATA_TTL_MULTIPLIER = env.float("MARKET_DATA_TTL_MULTIPLIER", default=3.0)
MARKET_DATA_CADENCE_S = env.list("MARKET_DATA_CADENCE_S", default=[])
MARKET_DATA_HEARTBEAT_S = env.float("MARKET_DATA_HEARTBEAT_S", default=1.0)
MARKET_DATA_FALLBACK = env.bool("MARKET_DATA_FALLBACK", default=True)
MARKET_DATA_SWEEP_S = env.float("MARKET_DATA_SWEEP_S", default=1.0)
MARKET_DATA_FALLBACK_MIN_POLL_S = env.float("MARKET_DATA_FALLBACK_MIN_POLL_S", default=1.0)
# REST calls per minute per venue for fallback polls: a fraction of the venue's limit,
# since the order path shares this IP.
MARKET_DATA_REST_PER_MINUTE = env.float("MARKET_DATA_REST_PER_MINUTE", default=60.0)
MARKET_DATA_REST_TIMEOUT_S = env.float("MARKET_DATA_REST_TIMEOUT_S", default=10.0)
MARKET_DATA_METADATA_RETRY_S = env.float("MARKET_DATA_METADATA_RETRY_S", default=5.0)
# CONFIG SET notify-keyspace-events at start (adds "Ex"); off for a Redis that refuses CONFIG.
MARKET_DATA_KEYSPACE_NOTIFICATIONS = env.bool("MARKET_DATA_KEYSPACE_NOTIFICATIONS", default=True)
