"""Auth prompts (the RecoveryManager's persistent half): publish, coalesce, resolve.

A prompt is keyed by its recovery URL (the broker's login link without `state`). Any
number of AWAITING_AUTH reports for one broker find the same open prompt and so share
one recovery token; resolving one prompt leaves every other open prompt alone.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from recovery.brokers import UnknownBroker, get_exchange
from recovery.models import AuthPrompt, BrokerToken, PromptResolution
from recovery.push import push_prompt_event_on_commit
from recovery.tokens import TokenKey


def prompt_audience_ids(prompt: AuthPrompt) -> list[int]:
    """The users who see `prompt`: its owner, or every active superuser when it has none.

    A prompt carries the OAuth state that completes a login, so it is never shown to
    staff in general: whoever holds it could log the token slot in to their own broker
    account.
    """
    if prompt.owner_id is not None:
        return [prompt.owner_id]
    return list(get_user_model().objects.filter(is_superuser=True, is_active=True).values_list("pk", flat=True))


def prompt_payload(prompt: AuthPrompt) -> dict[str, Any]:
    """What a browser may know about a prompt. Never a token: the prompt holds none."""
    token = str(prompt.recovery_token)
    return {
        "recovery_token": token,
        "broker": prompt.broker,
        "kind": prompt.kind,
        "terminal": prompt.terminal,
        "message": prompt.message,
        "login_url": prompt.login_url,
        "last_error": prompt.last_error,
        "submit_url": "" if prompt.terminal else reverse("recovery:submit-code", args=[token]),
        "created_at": prompt.created_at.isoformat() if prompt.created_at else "",
    }


def _owner_id(key: TokenKey) -> int | None:
    return BrokerToken.objects.filter(broker=key.broker, kind=key.kind.value).values_list("owner_id", flat=True).first()


def _open_prompt(*, recovery_key: str, key: TokenKey, defaults: dict[str, Any]) -> tuple[AuthPrompt, bool]:
    owner_id = _owner_id(key)
    existing = AuthPrompt.objects.filter(recovery_key=recovery_key, resolved_at__isnull=True).first()
    if existing is not None and existing.owner_id == owner_id:
        return existing, False
    if existing is not None:
        # Opened for someone else (or for no one): its recovery token was shown to that
        # audience, so the token's owner gets a fresh prompt instead of inheriting it.
        _resolve([existing], PromptResolution.SUPERSEDED)
    try:
        with transaction.atomic():
            prompt = AuthPrompt.objects.create(
                recovery_key=recovery_key, broker=key.broker, kind=key.kind.value, owner_id=owner_id, **defaults
            )
    except IntegrityError:
        # Another process opened it between our read and insert: share theirs.
        return AuthPrompt.objects.get(recovery_key=recovery_key, resolved_at__isnull=True), False
    return prompt, True


def _resolve(prompts: list[AuthPrompt], resolution: PromptResolution) -> int:
    now = timezone.now()
    resolved = 0
    for prompt in prompts:
        updated = AuthPrompt.objects.filter(pk=prompt.pk, resolved_at__isnull=True).update(
            resolved_at=now, resolution=resolution.value
        )
        if updated:
            resolved += 1
            push_prompt_event_on_commit(
                prompt_audience_ids(prompt), {"action": "clear", "recovery_token": str(prompt.recovery_token)}
            )
    return resolved


def prompt_publish_recoverable(*, key: TokenKey, message: str) -> AuthPrompt:
    """Open the login prompt for `key`, or return the one already open (coalesced by recovery URL)."""
    exchange = get_exchange(key.broker)
    recovery_key = exchange.authorization_url(None)
    with transaction.atomic():
        # A login prompt replaces a terminal one: the configuration was fixed.
        _resolve(_open_for(key, terminal=True), PromptResolution.SUPERSEDED)
        prompt, created = _open_prompt(recovery_key=recovery_key, key=key, defaults={"message": message})
        if created:
            prompt.login_url = exchange.authorization_url(str(prompt.recovery_token))
            prompt.save(update_fields=["login_url"])
            push_prompt_event_on_commit(
                prompt_audience_ids(prompt), {"action": "open", "prompt": prompt_payload(prompt)}
            )
    return prompt


def prompt_publish_terminal(*, key: TokenKey, message: str) -> AuthPrompt:
    """Replace the login prompt for `key` with a terminal error (no login link, no code form)."""
    with transaction.atomic():
        _resolve(_open_for(key, terminal=False), PromptResolution.SUPERSEDED)
        prompt, created = _open_prompt(
            recovery_key=f"terminal:{key}", key=key, defaults={"message": message, "terminal": True}
        )
        if not created and prompt.message != message:
            prompt.message = message
            prompt.save(update_fields=["message"])
            created = True  # re-push: the reason changed
        if created:
            push_prompt_event_on_commit(
                prompt_audience_ids(prompt), {"action": "open", "prompt": prompt_payload(prompt)}
            )
    return prompt


def prompt_record_error(*, prompt: AuthPrompt, error: str) -> None:
    """Show why the last code did not work, on every dashboard of the audience."""
    with transaction.atomic():
        AuthPrompt.objects.filter(pk=prompt.pk, resolved_at__isnull=True).update(last_error=error)
        prompt.last_error = error
        push_prompt_event_on_commit(prompt_audience_ids(prompt), {"action": "open", "prompt": prompt_payload(prompt)})


def prompt_resolve(*, prompt: AuthPrompt, resolution: PromptResolution) -> bool:
    """Resolve exactly this prompt; every other open prompt stays."""
    with transaction.atomic():
        return _resolve([prompt], resolution) == 1


def prompt_clear_logical(*, key: TokenKey, resolution: PromptResolution = PromptResolution.VALID_OUT_OF_BAND) -> int:
    """Resolve every open prompt of `key` (its token became valid without them)."""
    with transaction.atomic():
        return _resolve(
            list(AuthPrompt.objects.filter(broker=key.broker, kind=key.kind.value, resolved_at__isnull=True)),
            resolution,
        )


def prompt_follow_owner(*, key: TokenKey) -> int:
    """Give `key`'s open prompts to the token's current owner; return how many moved.

    Each prompt held by another audience is superseded (its dashboards are told to drop
    it) and reopened for the owner with a new recovery token: the old one, which is also
    the OAuth state, was visible to the previous audience.
    """
    moved = 0
    with transaction.atomic():
        owner_id = _owner_id(key)
        stale = list(
            AuthPrompt.objects.select_for_update()
            .filter(broker=key.broker, kind=key.kind.value, resolved_at__isnull=True)
            .exclude(owner_id=owner_id)  # with a None owner: the owned ones; else others' and unowned
        )
        for old in stale:
            if _resolve([old], PromptResolution.SUPERSEDED) != 1:
                continue
            prompt = AuthPrompt.objects.create(
                recovery_key=old.recovery_key,
                broker=old.broker,
                kind=old.kind,
                owner_id=owner_id,
                terminal=old.terminal,
                message=old.message,
            )
            if not prompt.terminal:
                prompt.login_url = _login_url(prompt)
                prompt.save(update_fields=["login_url"])
            push_prompt_event_on_commit(
                prompt_audience_ids(prompt), {"action": "open", "prompt": prompt_payload(prompt)}
            )
            moved += 1
    return moved


def _login_url(prompt: AuthPrompt) -> str:
    try:
        return get_exchange(prompt.broker).authorization_url(str(prompt.recovery_token))
    except UnknownBroker:
        return ""  # the broker was removed from the configuration; submitting says so


def _open_for(key: TokenKey, *, terminal: bool) -> list[AuthPrompt]:
    return list(
        AuthPrompt.objects.filter(broker=key.broker, kind=key.kind.value, terminal=terminal, resolved_at__isnull=True)
    )
