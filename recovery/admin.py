"""Token state and prompts in the admin: state and fingerprints only, never the token."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from recovery.models import AuthPrompt, BrokerToken
from recovery.services import token_await_auth
from recovery.tokens import TokenKind


@admin.register(BrokerToken)
class BrokerTokenAdmin(admin.ModelAdmin):
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Ask for a new login (OAuth tokens; also clears a terminal failure)")
    def request_login(self, request: HttpRequest, queryset: QuerySet[BrokerToken]) -> None:
        count = 0
        for token in queryset.filter(kind=TokenKind.OAUTH.value):
            count += token_await_auth(key=token.key, reason=f"login requested by {request.user}", clear_failure=True)
        self.message_user(request, f"{count} token(s) now await a login.", messages.SUCCESS)


@admin.register(AuthPrompt)
class AuthPromptAdmin(admin.ModelAdmin):
    list_display = ("broker", "kind", "terminal", "owner", "created_at", "resolved_at", "resolution")
    list_filter = ("broker", "kind", "terminal", "resolution")
    readonly_fields = [f.name for f in AuthPrompt._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
