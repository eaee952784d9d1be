"""Two deployments on one Redis server: pub/sub ignores the database, the namespace does not.

Runs two real publishers against the real Redis on two databases (this run's N and N+8)
and a reader per deployment subscribed to its own layout.
"""

from __future__ import annotations

import asyncio
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest
from channels.db import database_sync_to_async
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from redis.asyncio import Redis

from feeds.distribution.redispub.envelope import decode
from feeds.distribution.redispub.fallback import enable_expiry_notifications, missing_expiry_flags
from feeds.distribution.redispub.keys import namespaced_prefix
from tests.feeds.factories import make_feed
from tests.feeds.redispub.conftest import make_service, running
from tradingsite.settings.channel_layers import default_redis_namespace, redis_database_number

pytestmark = [pytest.mark.needs_redis, pytest.mark.django_db(transaction=True)]


def _on_database(url: str, number: int) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{number}", parts.query, parts.fragment))


def _two_databases() -> tuple[str, str]:
    """This run's database and the one 8 above it (the pair reserved for this run)."""
    own = redis_database_number(settings.REDIS_URL)
    return _on_database(settings.REDIS_URL, own), _on_database(settings.REDIS_URL, own + 8)


def test_the_namespace_comes_from_the_database_number_and_database_0_keeps_the_plain_names() -> None:
    assert redis_database_number("redis://127.0.0.1:6379/4") == 4
    assert redis_database_number("redis://127.0.0.1:6379?db=12") == 12
    assert redis_database_number("redis://127.0.0.1:6379") == 0
    assert default_redis_namespace("redis://h:6379/12") == "db12"
    assert default_redis_namespace("redis://h:6379/0") == ""
    assert namespaced_prefix("md", "db12") == "md.db12" and namespaced_prefix("md", "") == "md"


async def _heard(url: str, pattern: str, messages: int) -> set[str]:
    """Instance ids heard on `pattern` until `messages` messages arrived."""
    client = Redis.from_url(url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    await pubsub.psubscribe(pattern)
    heard: set[str] = set()
    try:
        count = 0
        async with asyncio.timeout(20):
            async for message in pubsub.listen():
                if message["type"] != "pmessage":
                    continue
                heard.add(decode(message["data"]).instance_id)
                count += 1
                if count >= messages:
                    break
    finally:
        await pubsub.aclose()
        await client.aclose()
    return heard


async def _run_two_publishers(base: str, namespaced: bool) -> tuple[set[str], str, str]:
    """Run one publisher per database; return what a reader of the first one's layout heard."""
    urls = _two_databases()
    prefixes = [namespaced_prefix(base, default_redis_namespace(url) if namespaced else "") for url in urls]
    clients = [Redis.from_url(url) for url in urls]
    services = [await make_service(client, prefix, ["sim"]) for client, prefix in zip(clients, prefixes)]
    try:
        async with running(services[0]), running(services[1]):
            # Heartbeats every 0.05 s from both: 40 messages cover many rounds of each.
            heard = await _heard(urls[0], f"{prefixes[0]}:*", 40)
    finally:
        for client, prefix in zip(clients, prefixes):
            keys = [key async for key in client.scan_iter(match=f"{prefix}:*")]
            if keys:
                await client.delete(*keys)
            await client.aclose()
    return heard, services[0].publisher.instance_id, services[1].publisher.instance_id


async def test_two_deployments_on_two_databases_never_hear_each_other() -> None:
    await database_sync_to_async(make_feed)("sim")
    base = f"t{uuid.uuid4().hex[:10]}"
    heard, mine, theirs = await _run_two_publishers(base, namespaced=True)
    assert heard == {mine}
    assert theirs not in heard


async def test_without_the_namespace_the_other_database_leaks_in() -> None:
    # The reason for the namespace: PUBLISH reaches every database's subscribers.
    await database_sync_to_async(make_feed)("sim")
    heard, mine, theirs = await _run_two_publishers(f"t{uuid.uuid4().hex[:10]}", namespaced=False)
    assert heard == {mine, theirs}


async def test_channel_layers_of_two_namespaces_on_one_database_are_apart() -> None:
    url = settings.REDIS_URL
    ours = RedisChannelLayer(hosts=[url], prefix=f"asgi.t{uuid.uuid4().hex[:8]}")
    theirs = RedisChannelLayer(hosts=[url], prefix=f"asgi.t{uuid.uuid4().hex[:8]}")
    try:
        mine, other = await ours.new_channel(), await theirs.new_channel()
        await ours.group_add("prices", mine)
        await theirs.group_add("prices", other)
        await ours.group_send("prices", {"type": "price", "value": 1})
        assert (await asyncio.wait_for(ours.receive(mine), 5))["value"] == 1
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(theirs.receive(other), 0.5)
    finally:
        await ours.flush()
        await theirs.flush()


def test_the_configured_channel_layer_carries_the_namespace() -> None:
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    expected = f"asgi.{settings.REDIS_NAMESPACE}" if settings.REDIS_NAMESPACE else "asgi"
    assert config["prefix"] == expected


async def test_expiry_notifications_add_only_the_missing_flags_and_keep_other_clients_flags() -> None:
    assert missing_expiry_flags("") == "Ex"
    assert missing_expiry_flags("KEA") == "" and missing_expiry_flags("Eg") == "x"
    client = Redis.from_url(settings.REDIS_URL)
    original = (await client.config_get("notify-keyspace-events"))["notify-keyspace-events"]
    try:
        await client.config_set("notify-keyspace-events", "Kg$")  # another client's choice
        assert await enable_expiry_notifications(client)
        flags = (await client.config_get("notify-keyspace-events"))["notify-keyspace-events"]
        assert set(flags.decode() if isinstance(flags, bytes) else flags) == set("Kg$Ex")
        assert await enable_expiry_notifications(client)  # already enough: left as it is
        again = (await client.config_get("notify-keyspace-events"))["notify-keyspace-events"]
        assert again == flags
    finally:
        await client.config_set("notify-keyspace-events", original)
        await client.aclose()
