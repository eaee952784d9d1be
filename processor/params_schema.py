"""A strategy's params checked against its kind's declared parameters, with JSON types.

The registry validates params with the kind's Django form, and a form coerces strings:
`"long_only": "maybe"` would become true and `"fast": "5"` the number 5. Params typed in
the admin are JSON, so each value must already have the JSON type of its parameter
(true/false for a flag, an integer or a string of digits for a count, a number or a
decimal string for a decimal) before the form checks ranges.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from core.json_limits import check_json_value
from processor.strategies import STRATEGIES, clean_params

_INTEGER = re.compile(r"-?[0-9]{1,18}")


def _type_error(name: str, field: forms.Field, value: object) -> str | None:
    if isinstance(field, forms.BooleanField):
        return None if isinstance(value, bool) else f"{name} must be true or false"
    if isinstance(field, forms.IntegerField) and not isinstance(field, forms.DecimalField | forms.FloatField):
        # A string of digits is unambiguous and is stored as the number; "maybe" or 1.5 are not.
        ok = (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and _INTEGER.fullmatch(value) is not None
        )
        return None if ok else f"{name} must be an integer"
    if isinstance(field, forms.DecimalField | forms.FloatField):
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            return f"{name} must be a number or a decimal string"
        try:
            Decimal(str(value))
        except InvalidOperation:
            return f"{name} must be a number or a decimal string"
        return None
    if isinstance(field, forms.CharField | forms.ChoiceField):
        return None if isinstance(value, str) else f"{name} must be a string"
    return None


def clean_strategy_params(kind: str, params: object) -> dict[str, Any]:
    """Return `params` for `kind` validated by type and by the kind's form; raise ValidationError per param."""
    if kind not in STRATEGIES:
        raise ValidationError(f"unknown strategy kind {kind!r}; known: {sorted(STRATEGIES)}")
    if not isinstance(params, Mapping):
        raise ValidationError("params must be a JSON object of the kind's parameters")
    check_json_value(params)
    fields = STRATEGIES[kind].params_form.base_fields
    errors = [
        message
        for name, value in params.items()
        if name in fields and (message := _type_error(name, fields[name], value)) is not None
    ]
    if errors:
        raise ValidationError(errors)
    try:
        return clean_params(kind, params)
    except ValidationError as exc:
        if hasattr(exc, "error_dict"):
            raise ValidationError(
                [
                    f"{name}: {'; '.join(messages)}" if name != "__all__" else "; ".join(messages)
                    for name, messages in exc.message_dict.items()
                ]
            ) from None
        raise
