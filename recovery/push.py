"""Live prompt updates to every open dashboard of a prompt's audience, over Channels."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from core.push_groups import user_group

log = logging.getLogger(__name__)

# The group message type; dashboard.consumers.DashboardConsumer relays it to browsers as "prompt".
PROMPT_EVENT = "recovery.prompt"


def push_prompt_event_rollback_unsafe(user_ids: Iterable[int], event: dict[str, Any]) -> None:
    """Send `event` to each user's group now; a failure is logged, the prompt stays in the database."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": PROMPT_EVENT, **event}
    for user_id in sorted(set(user_ids)):
        try:
            async_to_sync(layer.group_send)(user_group(user_id), message)
        except Exception:  # a dashboard that misses a push catches up on its next reload
            log.warning("recovery: prompt push to user %s failed", user_id, exc_info=True)


def push_prompt_event_on_commit(user_ids: list[int], event: dict[str, Any]) -> None:
    """Push after the surrounding transaction commits, so a rolled-back prompt is never shown."""
    transaction.on_commit(lambda: push_prompt_event_rollback_unsafe(user_ids, event))
