"""Write envelopes to Redis: `SET key bytes PX ttl` then `PUBLISH key bytes`, pipelined.

The SET makes freshness a property of the data: the key exists while the value is
fresh and disappears when its channel stops, with no second clock to disagree. One
`publish` call is one round trip however many messages it carries.

Publishes are serialised by a lock so that one key's sequence numbers reach Redis in
order (two pipelines on two pooled connections could overtake each other and show a
reader a gap that is not one), and so a conditional publish (`only_if`) decides and
writes without another publish slipping in between.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis
from redis.exceptions import RedisError

from feeds.distribution.redispub.cancel import reraise_if_cancelling
from feeds.distribution.redispub.envelope import Envelope, encode
from feeds.distribution.redispub.link_health import RedisLinkHealth


class KeySequences:
    """publish_seq per key, for one publishing instance."""

    def __init__(self) -> None:
        self._last: dict[str, int] = {}

    def next(self, key: str) -> int:
        seq = self._last.get(key, 0) + 1
        self._last[key] = seq
        return seq

    def last(self, key: str) -> int:
        return self._last.get(key, 0)


@dataclass(slots=True)
class Draft:
    """A message about to be published: the key, its TTL, and the unstamped envelope."""

    key: str
    ttl_ms: int
    envelope: Envelope


class RedisPublisher:
    """Stamps `publish_seq`, `instance_id` and `publish_time_ns`, then writes SET PX + PUBLISH."""

    def __init__(
        self,
        redis: Redis,
        *,
        instance_id: str,
        sequences: KeySequences | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
        link: RedisLinkHealth | None = None,
    ) -> None:
        self.redis = redis
        self.link = link  # told of every round trip's outcome (the component's health)
        self.instance_id = instance_id
        self.sequences = sequences or KeySequences()
        self._clock_ns = clock_ns
        self._lock = asyncio.Lock()
        self.messages_published = 0

    async def publish(self, drafts: Sequence[Draft], *, only_if: Callable[[], bool] | None = None) -> bool:
        """Publish `drafts` in one round trip; return False when `only_if()` said no.

        A failed round trip raises (redis.RedisError) after spending the sequence numbers:
        those messages are lost, and readers should see the gap.
        """
        if not drafts:
            return True
        async with self._lock:
            if only_if is not None and not only_if():
                return False
            pipe = self.redis.pipeline(transaction=False)
            now = self._clock_ns()
            for draft in drafts:
                envelope = draft.envelope
                envelope.publish_seq = self.sequences.next(draft.key)
                envelope.instance_id = self.instance_id
                envelope.publish_time_ns = now
                body = encode(envelope)
                pipe.set(draft.key, body, px=draft.ttl_ms)
                pipe.publish(draft.key, body)
            try:
                await pipe.execute()
            except (RedisError, OSError) as exc:
                reraise_if_cancelling()  # a stop, not an outage
                if self.link is not None:
                    self.link.failed(exc, lost=len(drafts))
                raise
            if self.link is not None:
                self.link.succeeded()
            self.messages_published += len(drafts)
            return True
