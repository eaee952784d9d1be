"""Pruning never deletes the evidence that an expected component is dead.

The clock is injected (`now=` on reports, selectors and the prune): "an hour later"
is a timestamp, not a sleep.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core import services
from core.expected import expected_components
from core.health import Health, ProcessIdentity, Status
from core.models import ComponentHealth
from core.selectors import component_health_effective
from feeds.models import Feed
from tradingsite.tasks import prune_component_health

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


def runfeed(label: str, instance: str) -> ProcessIdentity:
    return ProcessIdentity("host-a", 100, instance, "runfeed", label)


def report(process: ProcessIdentity, now, **components: Health) -> None:  # type: ignore[no-untyped-def]
    services.component_health_report(process=process, health=components, default_stale_after_s=15, now=now)


def prune(now):  # type: ignore[no-untyped-def]
    expected = [e.component for e in expected_components()]
    return services.component_health_prune(older_than=HOUR, expected=expected, now=now)


@pytest.fixture
def sim_feed() -> Feed:
    return Feed.objects.create(name="sim", venue="sim", market_type="spot")


def test_a_dead_feed_is_still_listed_after_a_prune_an_hour_later(sim_feed: Feed) -> None:
    died = timezone.now()
    report(
        runfeed("feed:sim", "dead"),
        died,
        processor=Health(Status.HEALTHY),
        **{"feed:sim": Health(Status.HEALTHY, "streaming")},
    )
    later = died + HOUR + timedelta(minutes=5)
    assert prune(later) == 0
    (feed,) = [v for v in component_health_effective(now=later) if v.component == "feed:sim"]
    assert (feed.status, feed.missing, feed.process) == (Status.BLOCKED, False, "host-a:100:dead")
    assert "no report for" in feed.reason and "last: HEALTHY streaming" in feed.reason
    # Its process's other rows stay with it: the whole picture of what died.
    assert set(ComponentHealth.objects.values_list("component", flat=True)) == {"feed:sim", "processor"}


def test_the_production_prune_job_keeps_the_dead_feed(sim_feed: Feed) -> None:
    long_ago = timezone.now() - 3 * HOUR
    report(runfeed("feed:sim", "dead"), long_ago, **{"feed:sim": Health(Status.HEALTHY)})
    report(runfeed("feed:gone", "gone"), long_ago, **{"feed:gone": Health(Status.HEALTHY)})  # no such feed enabled
    prune_component_health()
    assert list(ComponentHealth.objects.filter(component__startswith="feed:").values_list("component", flat=True)) == [
        "feed:sim"
    ]


def test_a_restart_lets_the_predecessor_go_but_only_once_it_is_gone(sim_feed: Feed) -> None:
    start = timezone.now()
    report(
        runfeed("feed:sim", "first"), start, processor=Health(Status.HEALTHY), **{"feed:sim": Health(Status.HEALTHY)}
    )
    report(runfeed("feed:sim", "second"), start + timedelta(minutes=1), **{"feed:sim": Health(Status.HEALTHY)})
    assert prune(start + timedelta(minutes=30)) == 0  # the first is superseded, but not an hour gone
    # Both died; an hour later only the last word on feed:sim is kept.
    assert prune(start + 2 * HOUR) == 2
    assert set(ComponentHealth.objects.values_list("process", flat=True)) == {"host-a:100:second"}


def test_a_live_process_is_never_pruned_however_old_its_start(sim_feed: Feed) -> None:
    start = timezone.now()
    process = runfeed("feed:sim", "live")
    report(process, start, **{"feed:sim": Health(Status.HEALTHY)})
    report(process, start + 3 * HOUR, **{"feed:sim": Health(Status.HEALTHY)})
    assert prune(start + 3 * HOUR + timedelta(seconds=2)) == 0


def test_a_disabled_feed_no_longer_protects_its_dead_process(sim_feed: Feed) -> None:
    start = timezone.now()
    report(runfeed("feed:sim", "dead"), start, **{"feed:sim": Health(Status.HEALTHY)})
    assert prune(start + 2 * HOUR) == 0
    Feed.objects.filter(pk=sim_feed.pk).update(enabled=False)
    assert prune(start + 2 * HOUR) == 1
    assert "feed:sim" not in {v.component for v in component_health_effective(now=start + 2 * HOUR)}


def test_an_enabled_feed_with_no_process_ever_is_listed_blocked(sim_feed: Feed) -> None:
    (feed,) = [v for v in component_health_effective() if v.component == "feed:sim"]
    assert (feed.status, feed.missing, feed.reason) == (Status.BLOCKED, True, "no process (enabled feed)")


def test_scheduled_jobs_are_expected() -> None:
    names = {e.component for e in expected_components()}
    assert {"job:prune-component-health", "job:orders-reconcile"} <= names
