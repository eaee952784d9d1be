"""Strategy kinds and the parameters each accepts.

A kind registers with `@register_kind`; its params form validates and normalises the
JSON params stored on a Strategy, so the admin shows an error per parameter.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable, Mapping, Sequence

from django import forms
from django.core.exceptions import ValidationError

KINDS: dict[str, type[forms.Form]] = {}


def register_kind(name: str) -> Callable[[type[forms.Form]], type[forms.Form]]:
    def register(form: type[forms.Form]) -> type[forms.Form]:
        KINDS[name] = form
        return form

    return register


def kind_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(KINDS)]


def clean_params(kind: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Return `params` validated for `kind` as JSON-ready values; raise ValidationError per param."""
    form_class = KINDS.get(kind)
    if form_class is None:
        raise ValidationError(f"unknown strategy kind {kind!r}; known: {sorted(KINDS)}")
    if not isinstance(params, Mapping):
        raise ValidationError("params must be a JSON object")
    unknown = set(params) - set(form_class.base_fields)
    form = form_class(data=params)
    errors: dict[str, Sequence[Any]] = {} if form.is_valid() else dict(form.errors)
    if unknown:
        errors["__all__"] = [f"unknown params {sorted(unknown)}; allowed: {sorted(form_class.base_fields)}"]
    if errors:
        raise ValidationError({name: list(messages) for name, messages in errors.items()})
    return {
        name: str(value) if isinstance(value, Decimal) else value
        for name, value in form.cleaned_data.items()
    }


@register_kind("ema")
class EmaParams(forms.Form):
    """Fast/slow EMA crossover over time buckets."""

    timeframe_s = forms.IntegerField(min_value=1, max_value=86_400)
    fast = forms.IntegerField(min_value=1, max_value=10_000)
    slow = forms.IntegerField(min_value=2, max_value=10_000)
    long_only = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if "fast" in cleaned and "slow" in cleaned and cleaned["fast"] >= cleaned["slow"]:
            self.add_error("slow", "slow must be greater than fast")
        return cleaned


@register_kind("volume_breakout")
class VolumeBreakoutParams(forms.Form):
    """Breakouts of synthetic volume bars over the last `lookback` bars."""

    bar_volume = forms.DecimalField(min_value=Decimal("0.000000000001"), max_digits=30, decimal_places=12)
    lookback = forms.IntegerField(min_value=1, max_value=10_000)
    hold_bars = forms.IntegerField(min_value=1, max_value=100_000)
    cooldown_bars = forms.IntegerField(min_value=0, max_value=100_000)
