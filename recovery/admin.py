"""Token state and prompts in the admin: state and fingerprints only, never the token.

A staff user who is not a superuser sees only the tokens and prompts they own and cannot
give a token to anyone else. When a superuser changes a token's owner, the change is
audited and the token's open prompt moves to the new owner with a new recovery token.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from core.admin_scope import OwnerScopedAdmin, is_superuser, owner_change
from recovery.brokers import UnknownBroker
from recovery.models import AuthPrompt, BrokerToken
from recovery.prompts import prompt_follow_owner
from recovery.services import token_await_auth
from recovery.tokens import TokenKind


@admin.register(BrokerToken)
class BrokerTokenAdmin(OwnerScopedAdmin):
    list_display = ("broker", "kind", "state", "reason", "fingerprint", "expires_at", "owner", "updated_at")
    list_filter = ("broker", "kind", "state")
    # The ciphertext is not even listed: it is useless to a reader and tempting to copy.
    fields = (
        "broker",
        "kind",
        "owner",
        "state",
        "reason",
        "error_code",
        "fingerprint",
        "issued_at",
        "expires_at",
        "updated_at",
    )
    readonly_fields = (
        "broker",
        "kind",
        "state",
        "reason",
        "error_code",
        "fingerprint",
        "issued_at",
        "expires_at",
        "updated_at",
    )
    actions = ["request_login"]
    owner_path = "owner"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A slot is the site's (feeds and orders read it); removing it is a superuser's call.
        return is_superuser(request) and super().has_delete_permission(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        # Only a superuser hands a token slot (and its logins) to someone.
        return fields if is_superuser(request) else (*fields, "owner")

    def save_model(self, request: HttpRequest, obj: BrokerToken, form: ModelForm, change: bool) -> None:
        before = BrokerToken.objects.filter(pk=obj.pk).values_list("owner_id", flat=True).first()
        if not is_superuser(request):
            obj.owner_id = before
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            if before != obj.owner_id:
                owner_change(
                    request=request, obj=obj, target=f"broker token {obj.key}", before_id=before, after_id=obj.owner_id
                )
                prompt_follow_owner(key=obj.key)

    @admin.action(description="Ask for a new login (OAuth tokens; also clears a terminal failure)")
    def request_login(self, request: HttpRequest, queryset: QuerySet[BrokerToken]) -> None:
        count = 0
        for token in queryset.filter(kind=TokenKind.OAUTH.value):
            try:
                count += token_await_auth(
                    key=token.key, reason=f"login requested by {request.user}", clear_failure=True
                )
            except UnknownBroker:
                self.message_user(request, f"{token.broker} is not configured: no login possible.", messages.ERROR)
        self.message_user(request, f"{count} token(s) now await a login.", messages.SUCCESS)


@admin.register(AuthPrompt)
class AuthPromptAdmin(OwnerScopedAdmin):
    """Unowned prompts are for superusers: the owner filter leaves them out for everyone else."""

    list_display = ("broker", "kind", "terminal", "owner", "created_at", "resolved_at", "resolution")
    list_filter = ("broker", "kind", "terminal", "resolution")
    readonly_fields = [f.name for f in AuthPrompt._meta.fields]
    owner_path = "owner"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A prompt ends by a login or a new token state, not by deleting it.
        return is_superuser(request) and super().has_delete_permission(request, obj)
