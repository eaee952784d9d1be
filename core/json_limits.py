"""Bounds on JSON typed into a form: size, nesting depth, an object at the top, storable values.

Python's parser recurses once per nesting level, so a few thousand brackets raise
RecursionError (a 500) before any validator runs; the depth is therefore measured on the
raw text first, without parsing. PostgreSQL's jsonb refuses NUL characters and NaN or
Infinity, which Python's parser accepts, so those are refused here too, as form errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

# A feed's settings or a strategy's params are a handful of keys: 16 KiB and 8 levels leave room.
MAX_JSON_CHARS = 16_384
MAX_JSON_DEPTH = 8
MAX_JSON_KEYS = 200
MAX_JSON_STRING_CHARS = 2_000


def raw_json_depth(text: str) -> int:
    """The deepest bracket nesting of `text`, ignoring brackets inside strings (no parsing)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValidationError(f"{name} is not a number JSON can store; write a finite number.", code="json_constant")


def check_json_value(value: object, *, max_depth: int = MAX_JSON_DEPTH, max_keys: int = MAX_JSON_KEYS) -> None:
    """Raise ValidationError unless `value` is plain, bounded JSON that PostgreSQL can store."""
    stack: list[tuple[object, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: list[object] = list(item.values())
            for key in item:
                if not isinstance(key, str):
                    raise ValidationError("Object keys must be strings.", code="json_key")
                _check_string(key)
        elif isinstance(item, list):
            children = list(item)
        else:
            if isinstance(item, str):
                _check_string(item)
            elif isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
                _refuse_constant(repr(item))
            elif item is not None and not isinstance(item, (bool, int, float)):
                raise ValidationError(f"{type(item).__name__} is not a JSON value.", code="json_type")
            continue
        if depth > max_depth:
            raise ValidationError(f"JSON nested deeper than {max_depth} levels.", code="json_depth")
        seen += len(children)
        if seen > max_keys:
            raise ValidationError(f"JSON with more than {max_keys} values.", code="json_size")
        stack.extend((child, depth + 1) for child in children)


def _check_string(text: str) -> None:
    if "\x00" in text:
        raise ValidationError("NUL characters are not allowed.", code="json_nul")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate ("\ud800") parses but can be neither stored nor shown.
        raise ValidationError("Strings must be valid Unicode text.", code="json_unicode") from None
    if len(text) > MAX_JSON_STRING_CHARS:
        raise ValidationError(f"Strings are limited to {MAX_JSON_STRING_CHARS} characters.", code="json_string")


def parse_bounded_json(
    text: str, *, max_chars: int = MAX_JSON_CHARS, max_depth: int = MAX_JSON_DEPTH, require_object: bool = True
) -> Any:
    """Parse `text` as bounded JSON; every refusal is a ValidationError, never RecursionError or a 500."""
    if len(text) > max_chars:
        raise ValidationError(f"At most {max_chars} characters of JSON.", code="json_size")
    if "\x00" in text:
        raise ValidationError("NUL characters are not allowed.", code="json_nul")
    if raw_json_depth(text) > max_depth:
        raise ValidationError(f"JSON nested deeper than {max_depth} levels.", code="json_depth")
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).") from None
    check_json_value(value, max_depth=max_depth)
    if require_object and not isinstance(value, dict):
        raise ValidationError(
            f'Enter a JSON object such as {{}} or {{"key": 1}}, not {type(value).__name__}.', code="json_object"
        )
    return value


class BoundedJSONField(forms.JSONField):
    """A form JSONField that refuses oversized, too deep or non-object JSON as a form error."""

    def __init__(
        self,
        *,
        max_chars: int = MAX_JSON_CHARS,
        max_depth: int = MAX_JSON_DEPTH,
        require_object: bool = True,
        **kwargs: Any,
    ) -> None:
        self.max_chars = max_chars
        self.max_depth = max_depth
        self.require_object = require_object
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        if self.disabled:
            return value
        if value in self.empty_values:
            return {} if self.require_object else None
        if isinstance(value, str):
            return parse_bounded_json(
                value, max_chars=self.max_chars, max_depth=self.max_depth, require_object=self.require_object
            )
        check_json_value(value, max_depth=self.max_depth)
        if self.require_object and not isinstance(value, dict):
            raise ValidationError("Enter a JSON object.", code="json_object")
        return value

    def bound_data(self, data: Any, initial: Any) -> Any:
        # Re-displaying a refused value must not parse it again (deep JSON would recurse).
        if self.disabled:
            return initial
        if isinstance(data, str):
            try:
                return parse_bounded_json(
                    data, max_chars=self.max_chars, max_depth=self.max_depth, require_object=False
                )
            except ValidationError:
                return forms.fields.InvalidJSONInput(data[: self.max_chars])
        return data
