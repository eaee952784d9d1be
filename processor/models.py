"""Strategies: a kind, validated params and the instruments they run on."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from processor.kinds import clean_params, kind_choices


class Strategy(models.Model):
    name = models.SlugField(max_length=60, unique=True)
    kind = models.CharField(max_length=40, choices=kind_choices)
    params = models.JSONField(default=dict, help_text="Validated per kind, e.g. ema: timeframe_s, fast, slow.")
    enabled = models.BooleanField(default=True)
    instruments = models.ManyToManyField("feeds.Instrument", related_name="strategies", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "strategies"

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    def clean(self) -> None:
        try:
            self.params = clean_params(self.kind, self.params)
        except ValidationError as exc:
            if hasattr(exc, "error_dict"):
                messages = [
                    f"{name}: {'; '.join(errs)}" if name != "__all__" else "; ".join(errs)
                    for name, errs in exc.message_dict.items()
                ]
            else:
                messages = exc.messages
            raise ValidationError({"params": messages}) from None
