"""Feed settings shared by the exchange venues: base URL overrides, validated per key."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError


def clean_exchange_settings(
    venue: str,
    settings: Mapping[str, object],
    defaults: Mapping[str, object],
) -> dict[str, object]:
    """Return `settings` over `defaults`, checking keys and the `ws_url` / `rest_url` overrides.

    The overrides replace the venue's base URLs (the adapter adds its paths), so a feed
    can point at a testnet or a local fake server.
    """
    cleaned = {**defaults, **settings}
    errors: dict[str, str] = {}
    unknown = set(settings) - set(defaults)
    if unknown:
        errors["settings"] = f"{venue}: unknown keys {sorted(unknown)}; allowed: {sorted(defaults)}"
    for key, schemes in (("ws_url", ("ws", "wss", "http", "https")), ("rest_url", ("http", "https"))):
        if key not in defaults:
            continue
        value = cleaned[key]
        if not isinstance(value, str) or urlsplit(value).scheme not in schemes or not urlsplit(value).netloc:
            errors[key] = f"{key} must be a URL starting with {' or '.join(s + '://' for s in schemes)}"
        else:
            cleaned[key] = value.rstrip("/")
    for key, default in defaults.items():
        if key in errors or key in ("ws_url", "rest_url"):
            continue
        if isinstance(default, bool) and not isinstance(cleaned[key], bool):
            errors[key] = f"{key} must be true or false"
        elif isinstance(default, str) and not isinstance(cleaned[key], str):
            errors[key] = f"{key} must be a string"
    if errors:
        raise ValidationError({key: [message] for key, message in errors.items()})
    return cleaned


def base_url(settings: Mapping[str, object], key: str, default: str) -> str:
    value = settings.get(key) or default
    return str(value).rstrip("/")
