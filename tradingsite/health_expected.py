"""The enabled feeds as expected components: a feed no process runs is listed, BLOCKED."""

from __future__ import annotations

from core.expected import ExpectedComponent


def enabled_feeds() -> list[ExpectedComponent]:
    from feeds.models import Feed

    names = Feed.objects.filter(enabled=True).order_by("name").values_list("name", flat=True)
    return [ExpectedComponent(f"feed:{name}", "enabled feed") for name in names]
