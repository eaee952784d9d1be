"""Limit/offset pagination that refuses what it cannot serve instead of guessing.

DRF's own silently falls back to the default page for `?limit=abc` and passes a huge
offset to the database (an overflow there, a 500 here). This one answers 400 naming
the parameter for a value that is not a whole number, a limit above API_MAX_PAGE_SIZE
or an offset beyond the database's 64-bit range.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request


def _whole_number(request: Request, name: str, low: int, high: int) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    text = str(raw).strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        raise ValidationError({name: [f"{text[:40]!r} is not a whole number"]})
    value = int(text)
    if not low <= value <= high:
        raise ValidationError({name: [f"must be between {low} and {high}"]})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """?limit=1..API_MAX_PAGE_SIZE (default API_PAGE_SIZE), ?offset=0.. within 64 bits."""

    @property
    def max_limit(self) -> int:  # type: ignore[override]
        return int(settings.API_MAX_PAGE_SIZE)

    def get_limit(self, request: Request) -> int | None:
        limit = _whole_number(request, self.limit_query_param, 1, self.max_limit)
        return self.default_limit if limit is None else limit

    def get_offset(self, request: Request) -> int:
        # offset + limit is one 64-bit LIMIT/OFFSET pair in the database.
        offset = _whole_number(request, self.offset_query_param, 0, 2**63 - 1 - self.max_limit)
        return 0 if offset is None else offset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_limit}
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 0}
        return parameters
