"""Kill switches, the control audit, users and API keys in the admin.

Kill switches and the audit are read-only here (changes go through the dashboard, which
audits them). Staff who are not superusers see only their own accounts' switches and
audit rows, and their own API key; the global kill switch, users and groups are for
superusers. Ownership changes made in other admins are audited here, because this app
owns the control audit.
"""

from __future__ import annotations

import importlib
from typing import Any

from django import forms
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from core.admin_scope import SuperuserOnlyAdmin, is_superuser, owner_changed
from core.json_limits import parse_bounded_json
from dashboard.models import ControlAction, ControlAudit, KillSwitch

# The control audit's action for a row moved to another owner in the admin.
OWNER_CHANGE_ACTION = ControlAction.OWNER_CHANGE


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(KillSwitch)
class KillSwitchAdmin(_ReadOnly):
    list_display = ["scope", "account", "engaged", "reason", "changed_by", "changed_at"]
    list_filter = ["engaged"]
    search_fields = ["scope", "account__name", "reason"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[KillSwitch]:
        queryset = super().get_queryset(request)
        # The global switch has no account, so the owner filter leaves it to superusers.
        return queryset if is_superuser(request) else queryset.filter(account__owner_id=request.user.pk)


@admin.register(ControlAudit)
class ControlAuditAdmin(_ReadOnly):
    list_display = ["created_at", "actor_name", "action", "target", "account", "reason"]
    list_filter = ["action"]
    search_fields = ["actor_name", "target", "reason"]
    date_hierarchy = "created_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ControlAudit]:
        queryset = super().get_queryset(request)
        if is_superuser(request):
            return queryset
        return queryset.filter(Q(account__owner_id=request.user.pk) | Q(actor_id=request.user.pk))


def _audit_owner_change(sender: type, *, actor: Any, target: str, account_id: int | None, **change: Any) -> None:
    ControlAudit.objects.create(
        actor=actor,
        actor_name=actor.get_username(),
        action=OWNER_CHANGE_ACTION,
        target=target[:200],
        account_id=account_id,
        before=change["before"],
        after=change["after"],
    )


owner_changed.connect(_audit_owner_change, dispatch_uid="dashboard.audit_owner_change")


# Users and groups belong to no one user: a staff user who may edit users could make
# themselves superuser, so only superusers manage them.
for _model, _base in ((User, UserAdmin), (Group, GroupAdmin)):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)
    admin.site.register(_model, type(f"Superuser{_base.__name__}", (SuperuserOnlyAdmin, _base), {}))


# Third-party apps whose rows belong to the whole site (login throttling records, the
# beat schedule): whatever admin they register becomes superuser-only. Their admin
# module is imported here first, so it has registered by the time it is wrapped, even
# for an app listed after this one.
SITE_WIDE_APPS = ("axes", "django_celery_beat")


def _superuser_only_admins(app_labels: tuple[str, ...]) -> None:
    for app_label in app_labels:
        if not apps.is_installed(app_label):
            continue
        importlib.import_module(f"{app_label}.admin")
        for model, model_admin in list(admin.site._registry.items()):
            if model._meta.app_config.name != app_label or isinstance(model_admin, SuperuserOnlyAdmin):
                continue
            admin.site.unregister(model)
            base = type(model_admin)
            admin.site.register(model, type(f"SuperuserOnly{base.__name__}", (SuperuserOnlyAdmin, base), {}))


_superuser_only_admins(SITE_WIDE_APPS)


def _bound_beat_forms() -> None:
    """Beat's forms parse JSON with a plain json.loads (deep JSON: a RecursionError) and save crontabs unparsed."""
    if not apps.is_installed("django_celery_beat"):
        return
    from celery.schedules import crontab, crontab_parser
    from django_celery_beat.admin import PeriodicTaskForm
    from django_celery_beat.models import CrontabSchedule, PeriodicTask

    class BoundedPeriodicTaskForm(PeriodicTaskForm):
        def _clean_json(self, field: str) -> Any:
            parse_bounded_json(self.cleaned_data[field] or "null", require_object=False)
            return super()._clean_json(field)

    class ParsedCrontabForm(forms.ModelForm):
        """A crontab that Celery cannot parse (a negative minute, say) is a form error, not a 500 on display."""

        def clean(self) -> dict[str, Any]:
            data = super().clean() or {}
            parts = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
            try:
                crontab(**{part: data[part] for part in parts if data.get(part)})
            except (ValueError, TypeError, crontab_parser.ParseException) as exc:
                raise ValidationError(f"Not a crontab Celery can run: {exc}") from None
            return data

    crontab_admin = type(admin.site._registry[CrontabSchedule])

    class ParsedCrontabAdmin(crontab_admin):  # type: ignore[valid-type,misc]
        form = ParsedCrontabForm

        @admin.display(description="human readable")
        def human_readable(self, obj: CrontabSchedule) -> str:
            # The refused form is shown again with its bad values on the unsaved row.
            try:
                return str(obj.human_readable)
            except (ValueError, TypeError, crontab_parser.ParseException):
                return "not a valid crontab"

    admin.site._registry[PeriodicTask].form = BoundedPeriodicTaskForm
    admin.site.unregister(CrontabSchedule)
    admin.site.register(CrontabSchedule, ParsedCrontabAdmin)


_bound_beat_forms()


if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class ApiKeyAdmin(TokenAdmin):
    """API keys: a staff user who is not a superuser sees and makes only their own key."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        return queryset if is_superuser(request) else queryset.filter(user_id=request.user.pk)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "user" and not is_superuser(request):
            kwargs["queryset"] = User.objects.filter(pk=request.user.pk or 0)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
