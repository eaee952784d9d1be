"""Browser pushes: channels_redis with REDIS_URL (any process reaches every socket), in-memory without.

Also the deployment's Redis namespace. Keys are per database, but pub/sub is server-wide
(Redis ignores the database number for PUBLISH/SUBSCRIBE), so two deployments sharing a
server would hear each other's messages. REDIS_NAMESPACE goes into every name this
deployment uses on Redis; by default it is derived from the REDIS_URL database number,
so deployments on different databases are apart with no setting at all.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.core.exceptions import ImproperlyConfigured

from tradingsite.settings.base import env

_NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


def redis_database_number(url: str) -> int:
    """Return the database number of a redis:// URL (path `/4` or `?db=4`); 0 when absent."""
    if not url:
        return 0
    parts = urlsplit(url)
    number = parts.path.strip("/") or (parse_qs(parts.query).get("db") or [""])[0]
    try:
        return int(number) if number else 0
    except ValueError:
        raise ImproperlyConfigured(f"REDIS_URL database {number!r} is not a number") from None


def default_redis_namespace(url: str) -> str:
    """Database 0 keeps the plain names (md:..., asgi:...); database N adds `dbN`."""
    number = redis_database_number(url)
    return f"db{number}" if number else ""


# Redis switches on every scale-out integration at once: this layer, Celery, the market-data publisher.
REDIS_URL = env.str("REDIS_URL", default="")
# Part of every key and channel this deployment uses on Redis ("" = the plain names).
REDIS_NAMESPACE = env.str("REDIS_NAMESPACE", default="") or default_redis_namespace(REDIS_URL)
if REDIS_NAMESPACE and not _NAMESPACE_PATTERN.match(REDIS_NAMESPACE):
    raise ImproperlyConfigured(f"REDIS_NAMESPACE {REDIS_NAMESPACE!r}: use 1-40 of A-Z a-z 0-9 _ . -")
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
                # This layer keeps its groups and queues in keys (no pub/sub), so the database
                # already separates deployments; the prefix also separates two on one database.
                "prefix": f"asgi.{REDIS_NAMESPACE}" if REDIS_NAMESPACE else "asgi",
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
