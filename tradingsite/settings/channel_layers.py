"""Browser pushes: channels_redis with REDIS_URL (any process reaches every socket), in-memory without."""

from __future__ import annotations

from typing import Any

from tradingsite.settings.base import env

# Redis switches on every scale-out integration at once: this layer, Celery, the market-data publisher.
REDIS_URL = env.str("REDIS_URL", default="")
CHANNEL_LAYERS: dict[str, dict[str, Any]]
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 reads with a 5 s socket timeout by default, the same 5 s that
            # channels_redis blocks in BZPOPMIN: the read then races the server's reply
            # and a cancelled send can surface as a TimeoutError. Read longer than it blocks.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15, "socket_connect_timeout": 5}],
                "capacity": 1000,
                "expiry": 30,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
