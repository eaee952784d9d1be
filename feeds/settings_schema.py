"""A feed's settings checked against its venue's declared settings before the venue reads them.

Each venue declares its settings with their defaults (`settings_defaults`, or the venue
module's DEFAULTS) and validates them in `clean_settings`. That code indexes and merges
the value, so it needs an object: a JSON list, string, number or boolean typed into the
admin must be a form error first. The default's JSON type is the key's type, so a key
given another type is refused here with its name, whatever the venue checks after.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from decimal import InvalidOperation

from django.core.exceptions import ValidationError

from core.json_limits import check_json_value
from feeds.venues import get_venue
from feeds.venues.base import Venue


def venue_settings_defaults(venue: Venue) -> Mapping[str, object]:
    """The settings a venue declares, with their defaults (empty when it declares none)."""
    declared = getattr(venue, "settings_defaults", None)
    if declared is None:
        declared = getattr(sys.modules.get(type(venue).__module__), "DEFAULTS", None)
    return declared if isinstance(declared, Mapping) else {}


def _json_type_matches(default: object, value: object) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, Mapping):
        return isinstance(value, Mapping)
    if isinstance(default, list):
        return isinstance(value, list)
    return True  # a None default takes any JSON value; the venue checks it


_TYPE_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "an object"}


def clean_feed_settings(venue_name: str, settings: object) -> dict[str, object]:
    """Return the venue's cleaned settings; every refusal is a ValidationError keyed by setting."""
    try:
        venue = get_venue(venue_name)
    except LookupError as exc:
        raise ValidationError({"venue": [str(exc)]}) from None
    if not isinstance(settings, Mapping):
        raise ValidationError({"settings": ["settings must be a JSON object of the venue's settings"]})
    check_json_value(settings)
    defaults = venue_settings_defaults(venue)
    errors: dict[str, list[str]] = {}
    for key, value in settings.items():
        if key in defaults and not _json_type_matches(defaults[key], value):
            wanted = _TYPE_NAMES.get(type(defaults[key]), type(defaults[key]).__name__)
            errors[key] = [f"{key} must be {wanted}"]
    if errors:
        raise ValidationError(errors)
    try:
        return venue.clean_settings(settings)
    except (TypeError, ValueError, InvalidOperation, KeyError) as exc:
        # The venue did not expect this shape; still a refusal of the input, not a server error.
        raise ValidationError({"settings": [f"{venue_name} cannot use these settings: {exc}"]}) from None
