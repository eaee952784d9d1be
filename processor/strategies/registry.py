"""The strategy registry: every kind the admin offers, the live processor runs and backtests replay.

A kind is a StrategyLogic subclass that declares its facts on itself (`kind`, its
`params_form`, `output_names`, `fixed_point_outputs`) and is registered with
`@register_strategy`. The model's choices, the admin's per-parameter errors, the
live processor and `manage.py backtest` all look kinds up here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from processor.outputs import StrategyOutput
from processor.strategies.base import StrategyLogic

# The Strategy.kind column is this wide.
KIND_MAX_LENGTH = 40

STRATEGIES: dict[str, type[StrategyLogic]] = {}


def register_strategy(cls: type[StrategyLogic]) -> type[StrategyLogic]:
    """Register a strategy class under its declared `kind`; a class decorator."""
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not 0 < len(kind) <= KIND_MAX_LENGTH:
        raise TypeError(f"{cls.__name__}.kind must be a name of 1 to {KIND_MAX_LENGTH} characters, not {kind!r}")
    params_form = getattr(cls, "params_form", None)
    if not (isinstance(params_form, type) and issubclass(params_form, forms.Form)):
        raise TypeError(f"{cls.__name__}.params_form must be a django.forms.Form subclass")
    if not getattr(cls, "output_names", None) or not isinstance(getattr(cls, "fixed_point_outputs", None), bool):
        raise TypeError(f"{cls.__name__} must declare output_names and fixed_point_outputs")
    if STRATEGIES.get(kind, cls) is not cls:
        raise ValueError(f"strategy kind {kind!r} is registered twice")
    STRATEGIES[kind] = cls
    return cls


def unregister_strategy(kind: str) -> None:
    """Forget `kind` (tests that register a throwaway kind)."""
    STRATEGIES.pop(kind, None)


def strategy_class(kind: str) -> type[StrategyLogic]:
    try:
        return STRATEGIES[kind]
    except KeyError:
        raise LookupError(f"unknown strategy kind {kind!r}; known: {sorted(STRATEGIES)}") from None


def kind_choices() -> list[tuple[str, str]]:
    """The Strategy.kind choices: a callable, so a new kind needs no migration."""
    return [(name, name) for name in sorted(STRATEGIES)]


def clean_params(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Return `params` validated for `kind` as JSON-ready values; raise ValidationError per param."""
    cls = STRATEGIES.get(kind)
    if cls is None:
        raise ValidationError(f"unknown strategy kind {kind!r}; known: {sorted(STRATEGIES)}")
    if not isinstance(params, Mapping):
        raise ValidationError("params must be a JSON object")
    form_class = cls.params_form
    unknown = set(params) - set(form_class.base_fields)
    form = form_class(data=params)
    errors: dict[str, list[str]] = (
        {}
        if form.is_valid()
        else {name: [str(message) for message in messages] for name, messages in form.errors.items()}
    )
    if unknown:
        errors["__all__"] = [f"unknown params {sorted(unknown)}; allowed: {sorted(form_class.base_fields)}"]
    if errors:
        raise ValidationError(errors)
    return {name: str(value) if isinstance(value, Decimal) else value for name, value in form.cleaned_data.items()}


def output_json_values(output: StrategyOutput) -> dict[str, Any]:
    """An output's values for JSON: decimal strings for prices and volumes, floats for indicators."""
    return strategy_class(output.kind).encode_values((output.time_ns, output.occurrence_ns, *output.values.values()))
