"""Collect what users asked to hear about into alert rows, one per event and channel.

The collector reads the site's own records after they are committed (fills, kill-switch
changes in the control audit, broker-login prompts, component health): the trade path
neither knows nor waits for alerts. A cursor per source says how far it has read; a
cursor moves in the same transaction as the alerts it produced, by a conditional
update, so two collectors never write the same alerts (the loser's rows roll back).
A source met for the first time starts at its present end: no backlog of old events.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from alerts.models import Alert, AlertCursor, AlertKind, NotificationChannel
from core.fixed_point import fixed_to_str
from core.health import Status
from core.selectors import ComponentView, component_health_effective
from dashboard.models import ControlAction, ControlAudit
from orders.models import Account, Fill
from preferences.time_format import CLOCK_MS, format_time, ns_to_datetime, user_time_zone_name, zone_named
from recovery.models import AuthPrompt
from recovery.prompts import prompt_audience_ids

log = logging.getLogger(__name__)

# At most this many source rows per source and run: a burst is worked off over a few runs.
BATCH = 500
_SEVERITY = {Status.HEALTHY: 0, Status.DEGRADED: 1, Status.BLOCKED: 2}


@dataclass(frozen=True)
class Event:
    kind: AlertKind
    source: str
    owner_ids: Sequence[int]
    title: str
    body: str


class _CursorMoved(Exception):
    """Another collector advanced this cursor first."""


def _staff_ids() -> list[int]:
    return list(get_user_model().objects.filter(is_staff=True, is_active=True).values_list("pk", flat=True))


def _record(events: Iterable[Event], now: datetime) -> int:
    """Insert one pending alert per event and interested enabled channel; return how many."""
    rows = []
    for event in events:
        channels = NotificationChannel.objects.filter(owner_id__in=event.owner_ids, enabled=True)
        for channel in channels:
            if channel.wants(event.kind):
                rows.append(
                    Alert(
                        owner_id=channel.owner_id,
                        channel=channel,
                        kind=event.kind,
                        source=event.source,
                        title=event.title[:200],
                        body=event.body,
                        next_attempt_at=now,
                    )
                )
    Alert.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def _advance(name: str, old: int | None, new: int) -> None:
    """Move cursor `name` from `old` to `new`, or raise _CursorMoved when someone else did."""
    if old is None:
        try:
            with transaction.atomic():
                AlertCursor.objects.create(name=name, position=new)
        except IntegrityError:
            raise _CursorMoved(name) from None
        return
    if not AlertCursor.objects.filter(name=name, position=old).update(position=new):
        raise _CursorMoved(name)


def _cursor(name: str) -> int | None:
    return AlertCursor.objects.filter(name=name).values_list("position", flat=True).first()


def _collect_by_id(name: str, rows_qs: QuerySet[Any], describe: Callable[[Any], list[Event]], now: datetime) -> int:
    """Alerts for the rows of `rows_qs` with an id past the cursor `name`."""
    last = _cursor(name)
    if last is None:
        end = rows_qs.model._default_manager.aggregate(end=Max("pk"))["end"] or 0
        try:
            with transaction.atomic():
                _advance(name, None, end)
        except _CursorMoved:
            pass
        return 0
    rows = list(rows_qs.filter(pk__gt=last).order_by("pk")[:BATCH])
    if not rows:
        return 0
    try:
        with transaction.atomic():
            made = _record((event for row in rows for event in describe(row)), now)
            _advance(name, last, rows[-1].pk)
    except _CursorMoved:
        return 0
    return made


def _fill_events(fill: Fill) -> list[Event]:
    order = fill.order
    account = fill.account
    zone = zone_named(user_time_zone_name(account.owner_id))
    when = format_time(ns_to_datetime(fill.ts_event), CLOCK_MS, zone=zone)
    what = f"{order.side} {fixed_to_str(fill.quantity)} {order.instrument.symbol} @ {fixed_to_str(fill.price)}"
    return [
        Event(
            AlertKind.FILL,
            f"fill:{fill.pk}",
            [account.owner_id],
            f"Fill on {account.name}: {what}",
            f"{order.intent.lower()} fill {what} on account {account.name} at {when} "
            f"(fee {fixed_to_str(fill.fee)}, order {order.client_order_id}).",
        )
    ]


def _kill_switch_events(row: ControlAudit) -> list[Event]:
    engaged = row.action == ControlAction.KILL_SWITCH_ENGAGE
    owners: list[int]
    if row.account_id is None:
        owners = _staff_ids()
    else:
        owners = list(Account.objects.filter(pk=row.account_id).values_list("owner_id", flat=True))
    verb = "engaged" if engaged else "released"
    reason = f" Reason: {row.reason}" if row.reason else ""
    return [
        Event(
            AlertKind.KILL_SWITCH,
            f"control:{row.pk}",
            owners,
            f"{row.target[:1].upper()}{row.target[1:]} {verb}",
            f"{row.target} {verb} by {row.actor_name}.{reason}"
            + (" No new entries until it is released; exits still run." if engaged else " New entries resume."),
        )
    ]


def _prompt_events(prompt: AuthPrompt) -> list[Event]:
    broker = prompt.broker.capitalize()
    title = f"{broker}: configuration needs fixing" if prompt.terminal else f"{broker} login needed"
    action = (
        "Fix the broker configuration; no login can help."
        if prompt.terminal
        else "Open the dashboard and log in at the broker (Upstox tokens expire every day)."
    )
    # The prompt's login link carries the OAuth state: never sent out, the dashboard shows it.
    return [
        Event(
            AlertKind.BROKER_LOGIN,
            f"prompt:{prompt.pk}",
            prompt_audience_ids(prompt),
            title,
            f"{prompt.message} {action}",
        )
    ]


def _collect_health(now: datetime) -> int:
    """Alert staff when a component turns DEGRADED or BLOCKED (once per change of status)."""
    made = 0
    staff: list[int] | None = None
    seen = dict(AlertCursor.objects.filter(name__startswith="health:").values_list("name", "position"))
    # One status per component: the worst of its counted rows (several processes may report it).
    worst: dict[str, ComponentView] = {}
    for view in component_health_effective(now=now):
        known = worst.get(view.component)
        if view.counts and (known is None or _SEVERITY[view.status] > _SEVERITY[known.status]):
            worst[view.component] = view
    for view in worst.values():
        name = f"health:{view.component}"[:200]
        last = seen.get(name)
        severity = _SEVERITY[view.status]
        if last == severity:
            continue
        try:
            with transaction.atomic():
                if last is not None and severity > last:
                    staff = _staff_ids() if staff is None else staff
                    event = Event(
                        AlertKind.HEALTH,
                        f"health:{view.component}:{view.status.value}:{int(now.timestamp())}"[:120],
                        staff,
                        f"{view.component} is {view.status.value}",
                        f"{view.component} ({view.process}) is {view.status.value}: {view.reason or 'no reason given'}.",
                    )
                    made += _record([event], now)
                _advance(name, last, severity)
        except _CursorMoved:
            continue
    return made


def alert_collect(*, now: datetime | None = None) -> dict[str, int]:
    """Turn new fills, kill-switch changes, login prompts and health changes into pending alerts."""
    now = now or timezone.now()
    return {
        "fills": _collect_by_id(
            "fills", Fill.objects.select_related("account", "order__instrument"), _fill_events, now
        ),
        "kill_switches": _collect_by_id(
            "kill_switches",
            ControlAudit.objects.filter(
                action__in=[ControlAction.KILL_SWITCH_ENGAGE, ControlAction.KILL_SWITCH_RELEASE]
            ),
            _kill_switch_events,
            now,
        ),
        "prompts": _collect_by_id("prompts", AuthPrompt.objects.all(), _prompt_events, now),
        "health": _collect_health(now),
    }
