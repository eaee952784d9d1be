"""Print live market-data messages from Redis for keys matching a pattern; flag drops.

    manage.py tap 'md:binance-usdm:*:BTC-USDT:*'
    manage.py tap 'md:*:health' --snapshot --count 20

Each line is one message: the key, seq, instance, source and status, then the data.
Lines starting with "!" flag a sequence gap (messages lost), an instance change (the
publisher restarted) or a seq that went backwards.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from redis import Redis
from redis.exceptions import RedisError

from feeds.distribution.redispub.envelope import Envelope, EnvelopeError, decode
from feeds.distribution.redispub.sequence_tracker import Finding, SequenceTracker


class Command(BaseCommand):
    help = "Print live market-data messages for keys matching PATTERN and flag seq gaps and restarts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("pattern", help="Redis glob over keys/channels, e.g. 'md:binance-usdm:*:trades'.")
        parser.add_argument("--redis-url", default=None, help="Default: REDIS_URL.")
        parser.add_argument("--count", type=int, default=0, help="Stop after this many messages (0: never).")
        parser.add_argument("--timeout", type=float, default=0.0, help="Stop after this many seconds (0: never).")
        parser.add_argument("--snapshot", action="store_true", help="First print the current value of matching keys.")

    def handle(
        self,
        *args: Any,
        pattern: str,
        redis_url: str | None,
        count: int,
        timeout: float,
        snapshot: bool,
        **options: Any,
    ) -> None:
        url = redis_url or settings.REDIS_URL
        if not url:
            raise CommandError("tap needs Redis: set REDIS_URL or pass --redis-url")
        if count < 0 or timeout < 0:
            raise CommandError("--count and --timeout must not be negative")
        redis = Redis.from_url(url)
        tracker = SequenceTracker()
        received = 0
        try:
            pubsub = redis.pubsub(ignore_subscribe_messages=True)
            pubsub.psubscribe(pattern)
            pubsub.get_message(timeout=1.0)  # the subscribe confirmation: live from here on
            self.stdout.write(f"tap: listening on {pattern}")
            self.stdout.flush()
            if snapshot:
                self._snapshot(redis, pattern)
            deadline = time.monotonic() + timeout if timeout else None
            while not count or received < count:
                wait_s = 1.0 if deadline is None else deadline - time.monotonic()
                if wait_s <= 0:
                    break
                message = pubsub.get_message(timeout=min(wait_s, 1.0))
                if message is None or message["type"] != "pmessage":
                    continue
                received += 1
                self._print(tracker, message["channel"].decode(), message["data"])
        except RedisError as exc:
            raise CommandError(f"tap: Redis failed: {exc!r}") from None
        except KeyboardInterrupt:
            pass
        finally:
            redis.close()
        self.stdout.write(
            f"tap: {received} messages, {tracker.gaps} gaps ({tracker.missed} lost), "
            f"{tracker.instance_changes} instance changes"
        )

    def _snapshot(self, redis: Redis, pattern: str) -> None:
        for key in sorted(redis.scan_iter(match=pattern, count=500)):
            body = redis.get(key)
            if isinstance(body, bytes):
                self.stdout.write(f"= {self._line(key.decode(), body)}")

    def _print(self, tracker: SequenceTracker, key: str, body: bytes) -> None:
        try:
            envelope = decode(body)
        except EnvelopeError as exc:
            self.stdout.write(f"! {key}: not an envelope: {exc}")
            return
        seen = tracker.observe(key, envelope.instance_id, envelope.publish_seq)
        if seen.finding is Finding.GAP:
            self.stdout.write(f"! GAP {key}: seq {seen.previous_seq} -> {envelope.publish_seq}, {seen.missed} lost")
        elif seen.finding is Finding.INSTANCE_CHANGE:
            self.stdout.write(
                f"! INSTANCE {key}: {seen.previous_instance} -> {envelope.instance_id} (publisher restarted)"
            )
        elif seen.finding is Finding.BACKWARDS:
            self.stdout.write(f"! BACKWARDS {key}: seq {seen.previous_seq} -> {envelope.publish_seq}")
        self.stdout.write(self._describe(key, envelope))
        self.stdout.flush()

    def _line(self, key: str, body: bytes) -> str:
        try:
            return self._describe(key, decode(body))
        except EnvelopeError as exc:
            return f"{key}: not an envelope: {exc}"

    @staticmethod
    def _describe(key: str, envelope: Envelope) -> str:
        reason = f" ({envelope.status_reason})" if envelope.status_reason else ""
        return (
            f"{key} seq={envelope.publish_seq} instance={envelope.instance_id} source={envelope.source} "
            f"status={envelope.status}{reason} {orjson.dumps(envelope.data).decode()}"
        )
