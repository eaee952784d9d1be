"""What a staff user who is not a superuser may see and change in the admin.

Model permissions say which kinds of rows a staff user may touch; they say nothing about
whose rows. So every admin page narrows further:

- per-user rows (accounts and everything hanging off them, the user's broker tokens and
  prompts, their own API key) are listed, opened and offered as choices only when the
  user owns them: another user's row is "not found", never shown or changed;
- rows that belong to no user (feeds, component health, the global kill switch, users
  and groups) are for superusers only.

Superusers see everything.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.dispatch import Signal
from django.http import HttpRequest


def is_superuser(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_superuser", False))


# The widest primary key any of the site's databases stores (a signed 64-bit integer).
_MAX_PK = 2**63 - 1


class BoundedModelMultipleChoiceField(forms.ModelMultipleChoiceField):  # type: ignore[type-arg]
    """Refuses an id no database could hold as a form error (SQLite raises OverflowError on it)."""

    def _check_values(self, value: Any) -> Any:
        for pk in value:
            text = str(pk).strip()
            if text.lstrip("-").isdigit() and abs(int(text)) > _MAX_PK:
                raise ValidationError(
                    self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": text[:40]}
                )
        return super()._check_values(value)  # type: ignore[misc]


class BoundedChoicesAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Every many-to-many choice list of the admin refuses out-of-range ids cleanly."""

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        kwargs.setdefault("form_class", BoundedModelMultipleChoiceField)
        return super().formfield_for_manytomany(db_field, request, **kwargs)


class SuperuserOnlyAdmin(BoundedChoicesAdmin):
    """A model that belongs to no user: only superusers see or change it."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_superuser(request) and super().has_module_permission(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_superuser(request) and super().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return is_superuser(request) and super().has_add_permission(request, *args)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_superuser(request) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_superuser(request) and super().has_delete_permission(request, obj)


class OwnerScopedAdmin(BoundedChoicesAdmin):
    """Rows reached from their owner by `owner_path` (a lookup ending at the user).

    `owned_choices` maps a foreign-key field to the lookup from its target model to the
    user, so that a choice list offers only the user's own rows (an account field offers
    the user's accounts, an owner field the user alone).
    """

    owner_path: str = "owner"
    owned_choices: dict[str, str] = {}

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if is_superuser(request):
            return queryset
        return queryset.filter(**{self.owner_path: request.user.pk})

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        path = self.owned_choices.get(db_field.name)
        if path is not None and not is_superuser(request):
            kwargs["queryset"] = owned_rows(db_field.remote_field.model, path, request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


def owned_rows(model: type[Model], path: str, request: HttpRequest) -> QuerySet[Any]:
    """The rows of `model` the request's user owns (`path` is "pk" for the user model itself)."""
    return model._default_manager.filter(**{path: request.user.pk})


# Sent by an admin when it moves a row to another owner; the dashboard app writes the
# control audit row (it owns that model, and lower layers must not import it).
# Keyword arguments: actor, target (str), account_id (int | None), before, after (dicts).
owner_changed = Signal()


def owner_change(
    *,
    request: HttpRequest,
    obj: Model,
    target: str,
    before_id: int | None,
    after_id: int | None,
    account_id: int | None = None,
) -> None:
    """Announce that `obj` moved from user `before_id` to `after_id` (called inside the save's transaction)."""
    owner_changed.send(
        sender=type(obj),
        actor=request.user,
        target=target,
        account_id=account_id,
        before={"owner_id": before_id},
        after={"owner_id": after_id},
    )
