"""Reported component health, per process: stale reports count, two processes never collide."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from core import services
from core.expected import ExpectedComponent
from core.health import Health, HealthBoard, ProcessIdentity, Status, worst
from core.models import ComponentHealth
from core.selectors import component_health_effective

pytestmark = pytest.mark.django_db

NOTHING_EXPECTED: list[ExpectedComponent] = []


def runfeed(label: str, instance: str, pid: int = 100) -> ProcessIdentity:
    return ProcessIdentity("host-a", pid, instance, "runfeed", label)


def report(process: ProcessIdentity | str, now=None, **components: Health) -> None:  # type: ignore[no-untyped-def]
    services.component_health_report(process=process, health=components, default_stale_after_s=15, now=now)


def test_two_processes_reporting_the_same_component_keep_a_row_each() -> None:
    sim, binance = runfeed("feed:sim", "i-sim", 100), runfeed("feed:binance", "i-bin", 200)
    for _ in range(3):  # every 2 s in production: the rows must not flip between owners
        report(sim, processor=Health(Status.HEALTHY, "routing"))
        report(binance, processor=Health(Status.BLOCKED, "mailbox full"))
    rows = {(r.process, r.status) for r in ComponentHealth.objects.filter(component="processor")}
    assert rows == {("host-a:100:i-sim", "HEALTHY"), ("host-a:200:i-bin", "BLOCKED")}
    views = component_health_effective(expected=NOTHING_EXPECTED)
    assert sorted((v.label, v.status) for v in views) == [
        ("feed:binance", Status.BLOCKED),
        ("feed:sim", Status.HEALTHY),
    ]


def test_the_board_carries_the_process_and_reports_under_it() -> None:
    board = HealthBoard(runfeed("feed:sim", "i-1"))
    board.set("recorder", Status.DEGRADED, "flush slow")
    report(board.process, **board.snapshot())
    (row,) = ComponentHealth.objects.all()
    assert (row.process, row.role, row.label, row.host, row.pid) == (
        "host-a:100:i-1",
        "runfeed",
        "feed:sim",
        "host-a",
        100,
    )
    assert HealthBoard().process.pid > 0  # a board made without one names this process


def test_a_report_nobody_refreshes_turns_into_its_stale_status() -> None:
    report("p1", **{"feed:a": Health(Status.HEALTHY, "streaming")})
    later = timezone.now() + timedelta(seconds=16)
    (view,) = component_health_effective(now=later, expected=NOTHING_EXPECTED)
    assert view.status is Status.BLOCKED and not view.fresh
    assert "no report for 16s" in view.reason


def test_a_process_report_replaces_its_previous_components_only() -> None:
    report("p1", **{"feed:a": Health(Status.HEALTHY), "feed:b": Health(Status.HEALTHY)})
    report("p2", **{"feed:c": Health(Status.HEALTHY)})
    report("p1", **{"feed:a": Health(Status.HEALTHY)})
    assert set(ComponentHealth.objects.values_list("component", flat=True)) == {"feed:a", "feed:c"}
    services.component_health_withdraw(process="p1")
    assert set(ComponentHealth.objects.values_list("component", flat=True)) == {"feed:c"}


def test_a_restarted_process_supersedes_its_dead_predecessor_which_stays_listed() -> None:
    start = timezone.now()
    report(
        runfeed("feed:sim", "old"), now=start, processor=Health(Status.HEALTHY), **{"feed:sim": Health(Status.HEALTHY)}
    )
    report(runfeed("feed:sim", "new"), now=start + timedelta(seconds=30), processor=Health(Status.HEALTHY))
    views = component_health_effective(now=start + timedelta(seconds=31), expected=NOTHING_EXPECTED)
    old = [v for v in views if v.process.endswith(":old")]
    assert {v.component for v in old} == {"processor", "feed:sim"}
    assert all(v.superseded and v.status is Status.BLOCKED for v in old)
    assert [v.superseded for v in views if v.process.endswith(":new")] == [False]


def test_another_feed_process_does_not_supersede_a_dead_one() -> None:
    start = timezone.now()
    report(runfeed("feed:binance", "bin"), now=start, processor=Health(Status.HEALTHY))
    report(runfeed("feed:sim", "sim"), now=start + timedelta(seconds=30), processor=Health(Status.HEALTHY))
    views = component_health_effective(now=start + timedelta(seconds=31), expected=NOTHING_EXPECTED)
    dead = next(v for v in views if v.label == "feed:binance")
    assert dead.status is Status.BLOCKED and not dead.superseded


def test_internal_health_lists_processes_components_and_missing_expected_ones(client: Client) -> None:
    from feeds.models import Feed

    Feed.objects.create(name="nobody", venue="sim", market_type="spot")
    staff = get_user_model().objects.create_user("ops", password="x", is_staff=True)
    client.force_login(staff)
    report(
        runfeed("feed:a", "i-a"),
        **{"feed:a": Health(Status.DEGRADED, "lagging"), "runtime:feed:a": Health(Status.HEALTHY)},
    )
    body = client.get("/internal/health").json()
    by_name = {c["component"]: c for c in body["components"]}
    assert (by_name["feed:a"]["status"], by_name["feed:a"]["reason"], by_name["feed:a"]["role"]) == (
        "DEGRADED",
        "lagging",
        "runfeed",
    )
    assert by_name["feed:a"]["process"] == "host-a:100:i-a"
    assert (by_name["feed:nobody"]["status"], by_name["feed:nobody"]["missing"]) == ("BLOCKED", True)
    assert by_name["feed:nobody"]["reason"] == "no process (enabled feed)"
    assert "feed:nobody" in body["missing"]
    assert body["status"] == "BLOCKED" and body["feeds"]["feed:nobody"]["status"] == "BLOCKED"
    (process,) = body["processes"]
    assert (process["process"], process["role"], process["label"], process["live"]) == (
        "host-a:100:i-a",
        "runfeed",
        "feed:a",
        True,
    )


def test_a_scheduled_job_never_run_is_late_only_after_two_cadences() -> None:
    job = ExpectedComponent("job:x", "scheduled job", None, 120.0)
    start = timezone.now()
    report(runfeed("feed:a", "i-a"), now=start, **{"feed:a": Health(Status.HEALTHY)})
    (waiting,) = [v for v in component_health_effective(now=start, expected=[job]) if v.missing]
    assert waiting.status is Status.HEALTHY and "waiting for its first run" in waiting.reason
    # The deployment (its oldest live process) has been up longer than two cadences.
    ComponentHealth.objects.update(started_at=start - timedelta(seconds=200))
    (late,) = [v for v in component_health_effective(now=start, expected=[job]) if v.missing]
    assert late.status is Status.DEGRADED and "no process has reported a run" in late.reason


def test_the_health_panel_shows_process_role_last_seen_and_missing_entries(client: Client) -> None:
    from feeds.models import Feed

    Feed.objects.create(name="nobody", venue="sim", market_type="spot")
    client.force_login(get_user_model().objects.create_user("ops", password="x", is_staff=True))
    report(runfeed("feed:a", "i-a"), processor=Health(Status.HEALTHY, "routing"))
    html = client.get("/dashboard/panels/health/").content.decode()
    assert 'data-component="feed:nobody" data-process="" data-missing="1"' in html
    assert "expected, no process" in html and "never" in html
    assert "runfeed feed:a" in html and "host-a:100" in html and "s ago" in html
    assert 'id="health-processes"' in html and 'data-process="host-a:100:i-a"' in html


def test_board_and_worst() -> None:
    board = HealthBoard()
    board.set("x", Status.DEGRADED, "why")
    assert board.get("x") == Health(Status.DEGRADED, "why")
    board.remove("x")
    assert board.snapshot() == {}
    assert worst([]) is Status.HEALTHY
    assert worst([Status.HEALTHY, Status.BLOCKED, Status.DEGRADED]) is Status.BLOCKED
