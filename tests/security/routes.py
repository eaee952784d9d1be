"""Every URL pattern of the site, read from the resolver, as one string per route."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from django.urls import URLPattern, URLResolver, get_resolver


def _walk(patterns: Sequence[URLPattern | URLResolver], prefix: str) -> Iterator[str]:
    for pattern in patterns:
        text = prefix + str(pattern.pattern).lstrip("^").rstrip("$")
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, text)
        else:
            yield text


def site_routes() -> list[str]:
    """Each route as its patterns joined (regex anchors dropped), e.g. "api/orders/(?P<pk>[^/.]+)/"."""
    return list(_walk(get_resolver().url_patterns, ""))
