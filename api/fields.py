"""Serializer fields for the project's exact numbers."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fixed_point import fixed_to_str


@extend_schema_field({"type": "string", "format": "decimal", "example": "64000.5"})
class FixedPointField(serializers.Field):
    """A fixed-point integer (value x core.fixed_point.SCALE) sent as an exact decimal string; None stays null."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: int | None) -> str | None:
        return None if value is None else fixed_to_str(int(value))


@extend_schema_field({"type": "string", "format": "date-time"})
class NanosecondsField(serializers.Field):
    """UTC nanoseconds sent as an ISO 8601 time with microseconds."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: int) -> str:
        from datetime import datetime

        seconds, nanos = divmod(int(value), 1_000_000_000)
        return datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=nanos // 1000).isoformat()
