"""Alerts reach a real webhook on 127.0.0.1 through apprise, retried after a refusal, off the trade path."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from alerts.channels import channel_url_encrypt
from alerts.collect import alert_collect
from alerts.delivery import alert_deliver_due
from alerts.models import Alert, AlertKind, DeliveryState, NotificationChannel
from dashboard.services import kill_switch_set
from orders.models import Fill, Position
from tests.fakes.webhook import FakeWebhook
from tests.orders.factories import make_setup, trade_on_paper

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def webhook() -> Iterator[FakeWebhook]:
    hook = FakeWebhook()
    yield hook
    hook.stop()


def channel_for(user_id: int, url: str, **wants: bool) -> NotificationChannel:
    return NotificationChannel.objects.create(
        owner_id=user_id,
        name=f"hook-{user_id}",
        url_ciphertext=channel_url_encrypt(url),
        url_display="json://…",
        **wants,
    )


def later(seconds: float) -> timezone.datetime:
    return timezone.now() + timedelta(seconds=seconds)


def test_a_fill_alert_is_retried_after_the_webhook_answers_500_and_then_delivered(settings, webhook) -> None:
    settings.ALERT_RETRY_BASE_S = 1.0
    setup = make_setup()
    channel = channel_for(setup.account.owner_id, webhook.start().url)
    webhook.statuses = [500]
    alert_collect()  # first sight of the sources: starts at their end
    trade_on_paper([setup])
    assert alert_collect()["fills"] == 1
    (alert,) = Alert.objects.filter(channel=channel)
    assert alert.kind == AlertKind.FILL and "BUY 0.01 BTCUSDT" in alert.title

    assert alert_deliver_due(rng=random.Random(1)) == {"retrying": 1}
    alert.refresh_from_db()
    assert (alert.state, alert.attempts) == (DeliveryState.PENDING, 1)
    assert alert.last_error and webhook.received == []
    assert alert_deliver_due(now=later(1.5)) == {DeliveryState.DELIVERED: 1}
    alert.refresh_from_db()
    assert (alert.state, alert.attempts, alert.last_error) == (DeliveryState.DELIVERED, 2, "")
    (request,) = webhook.received
    assert request["path"] == "/hook"
    assert request["body"]["title"] == alert.title and "fill" in request["body"]["message"]


def test_a_refused_connection_is_retried_until_the_webhook_listens(settings, webhook) -> None:
    settings.ALERT_RETRY_BASE_S = 1.0
    user = get_user_model().objects.create_user("eve", password="pw-123456", is_staff=True)
    channel_for(user.pk, webhook.url)  # nothing listens on the port yet
    alert_collect()
    kill_switch_set(actor=user, account_id=None, engaged=True, reason="drill")
    assert alert_collect()["kill_switches"] == 1
    assert alert_deliver_due() == {"retrying": 1}
    webhook.start()
    assert alert_deliver_due(now=later(1.5)) == {DeliveryState.DELIVERED: 1}
    (request,) = webhook.received
    assert request["body"]["title"] == "Global kill switch engaged"
    assert "drill" in request["body"]["message"]


def test_delivery_gives_up_after_the_configured_attempts(settings, webhook) -> None:
    settings.ALERT_MAX_ATTEMPTS = 2
    user = get_user_model().objects.create_user("ann", password="pw-123456", is_staff=True)
    channel_for(user.pk, webhook.url)
    alert_collect()
    kill_switch_set(actor=user, account_id=None, engaged=True, reason="drill")
    alert_collect()
    assert alert_deliver_due() == {"retrying": 1}
    assert alert_deliver_due(now=later(settings.ALERT_RETRY_MAX_S + 1)) == {DeliveryState.FAILED: 1}
    assert alert_deliver_due(now=later(3600)) == {}
    assert Alert.objects.get().state == DeliveryState.FAILED


def test_a_failing_delivery_never_blocks_a_fill_being_booked(webhook) -> None:
    first, second = make_setup(), make_setup()
    for setup in (first, second):
        channel_for(setup.account.owner_id, webhook.url)  # refuses every connection
    alert_collect()
    trade_on_paper([first])
    alert_collect()
    assert alert_deliver_due() == {"retrying": 1}
    trade_on_paper([second])  # booked while the first alert's delivery is failing
    alert_collect()
    for setup in (first, second):
        assert Fill.objects.filter(account=setup.account).count() == 1
        assert Position.objects.get(account=setup.account).quantity > 0
    assert list(Alert.objects.values_list("state", flat=True)) == [DeliveryState.PENDING] * 2


def test_an_alert_goes_only_to_the_owner_and_only_for_the_kinds_chosen(webhook) -> None:
    alice, bob = make_setup(), make_setup()
    channel_for(alice.account.owner_id, webhook.url)
    channel_for(bob.account.owner_id, webhook.url, notify_fills=False)
    alert_collect()
    trade_on_paper([alice, bob])
    assert alert_collect()["fills"] == 1
    assert Alert.objects.get().owner_id == alice.account.owner_id


def test_collecting_twice_alerts_once_per_event(webhook) -> None:
    setup = make_setup()
    channel_for(setup.account.owner_id, webhook.url)
    alert_collect()
    trade_on_paper([setup])
    alert_collect()
    alert_collect()
    assert Alert.objects.count() == 1


def test_a_component_turning_degraded_alerts_staff_once() -> None:
    from core.models import ComponentHealth

    staff = get_user_model().objects.create_user("ops", password="pw-123456", is_staff=True)
    trader = get_user_model().objects.create_user("trader", password="pw-123456")
    channel_for(staff.pk, "json://127.0.0.1:9/hook")
    channel_for(trader.pk, "json://127.0.0.1:9/hook")
    row = ComponentHealth.objects.create(
        component="processor", process="p1", status="HEALTHY", reason="", stale_after_s=60, updated_at=timezone.now()
    )
    alert_collect()
    ComponentHealth.objects.filter(pk=row.pk).update(status="DEGRADED", reason="stopping with open positions")
    assert alert_collect()["health"] == 1
    assert alert_collect()["health"] == 0
    alert = Alert.objects.get()
    assert alert.owner_id == staff.pk and "stopping with open positions" in alert.body


def test_a_component_reported_by_two_processes_alerts_on_its_worst_status_only_once() -> None:
    from core.models import ComponentHealth

    staff = get_user_model().objects.create_user("ops2", password="pw-123456", is_staff=True)
    channel_for(staff.pk, "json://127.0.0.1:9/hook")
    for process, status in (("p1", "HEALTHY"), ("p2", "HEALTHY")):
        ComponentHealth.objects.create(
            component="feed:sim/trades", process=process, status=status, stale_after_s=60, updated_at=timezone.now()
        )
    alert_collect()
    ComponentHealth.objects.filter(process="p2").update(status="DEGRADED", reason="reconnecting")
    assert alert_collect()["health"] == 1
    assert alert_collect()["health"] == 0
    assert alert_collect()["health"] == 0
