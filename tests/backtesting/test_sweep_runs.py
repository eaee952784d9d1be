"""Sweeps from the browser and the API: the task, the in-process job, progress pushes, the ranked table, tenants."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from backtesting import tasks
from backtesting.models import BacktestSweep, RunStatus
from backtesting.sweep import grid_points
from backtesting.sweep_services import SweepRequest, backtest_sweep_create, backtest_sweep_execute
from tests.backtesting.factories import START_NS, record_flipping_ticks, record_walk_ticks, run_request
from tradingsite.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)  # the ticks are read by a thread of its own

# Eight points of the EMA crossover's periods; all valid (fast below slow).
GRID = {"fast": [2, 3, 4, 5], "slow": [8, 12]}
WALK_END_NS = START_NS + 3_600 * 1_000_000_000


def user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, password="pw-long-enough-123", **extra)


def logged_in(who: Any) -> Client:
    client = Client()
    client.force_login(who)
    return client


def queued_sweep(
    owner: Any, instrument: Any, *, metric: str = "pnl", workers: int = 2, trials: int | None = None, **grid: Any
) -> BacktestSweep:
    """A queued sweep stored without being started (the test starts it); with `trials`, `grid` is the search space."""
    run = run_request(instrument, kind="ema", params={"timeframe_s": 10}, end_ns=WALK_END_NS)
    grid = grid or GRID
    return BacktestSweep.objects.create(
        owner=owner,
        grid=grid,
        metric=metric,
        workers=workers,
        trials=trials,
        seed=5,
        points_total=trials or len(grid_points(run.params, grid)),
        **vars(run),
    )


def test_the_celery_task_sweeps_eight_points_over_two_processes_best_first_and_deterministic() -> None:
    trader = user("trader")
    instrument = record_walk_ticks()
    parallel = queued_sweep(trader, instrument, workers=2)
    assert "8 points over 1500 ticks" in tasks.backtest_sweep_execute(parallel.pk)
    serial = queued_sweep(trader, instrument, workers=1)
    backtest_sweep_execute(sweep_id=serial.pk)
    parallel.refresh_from_db()
    serial.refresh_from_db()
    assert parallel.status == serial.status == RunStatus.DONE
    assert (parallel.points_done, parallel.points_total, parallel.progress) == (8, 8, 1.0)
    assert parallel.results == serial.results  # the same table whatever the processes
    assert sorted(row["index"] for row in parallel.results) == list(range(8))
    pnls = [Decimal(row["figures"]["pnl"]) for row in parallel.results]
    assert pnls == sorted(pnls, reverse=True) and len(set(pnls)) > 1
    assert all(row["figures"]["trades"] > 0 for row in parallel.results)


def test_a_sweep_is_executed_once_even_when_its_task_is_delivered_twice() -> None:
    sweep = queued_sweep(user("trader"), record_walk_ticks(count=200), workers=1, fast=[2], slow=[8])
    backtest_sweep_execute(sweep_id=sweep.pk)
    finished_at = BacktestSweep.objects.get(pk=sweep.pk).finished_at
    assert "not queued" in backtest_sweep_execute(sweep_id=sweep.pk)
    assert BacktestSweep.objects.get(pk=sweep.pk).finished_at == finished_at


def test_a_refused_point_is_listed_last_with_its_reason_and_a_sweep_without_ticks_fails_stored() -> None:
    trader = user("trader")
    instrument = record_walk_ticks(count=300)
    sweep = queued_sweep(trader, instrument, workers=1, fast=[20, 3], slow=[8])
    backtest_sweep_execute(sweep_id=sweep.pk)
    sweep.refresh_from_db()
    assert [(row["params"]["fast"], bool(row["refused"])) for row in sweep.results] == [(3, False), (20, True)]
    missing = queued_sweep(trader, instrument, workers=1, fast=[3], slow=[8])
    BacktestSweep.objects.filter(pk=missing.pk).update(symbols=["NOPE"])
    assert "failed" in backtest_sweep_execute(sweep_id=missing.pk)
    missing.refresh_from_db()
    assert missing.status == RunStatus.FAILED and "NOPE" in missing.error and missing.results is None


def test_in_the_embedded_default_a_created_sweep_runs_in_a_background_thread(settings, held_threads) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    run = run_request(record_flipping_ticks(), params={"bar_volume": "10"})
    sweep = backtest_sweep_create(
        owner=user("trader"), request=SweepRequest(run=run, grid={"lookback": [2, 3]}, metric="sharpe", workers=1)
    )
    assert sweep.points_total == 2
    assert held_threads.finish() == [f"backtest-sweep-{sweep.pk}"]
    done = BacktestSweep.objects.get(pk=sweep.pk, status=RunStatus.DONE)
    assert len(done.results) == 2


async def test_the_owner_socket_receives_the_sweep_progress_and_no_other_does() -> None:
    alice, bob = await database_sync_to_async(user)("alice"), await database_sync_to_async(user)("bob")
    sweep = await database_sync_to_async(lambda: queued_sweep(alice, record_walk_ticks(count=300), workers=1))()
    sockets = {}
    for who in (alice, bob):
        client = await database_sync_to_async(logged_in)(who)
        cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
        headers = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000"), (b"cookie", cookie)]
        sockets[who.username] = WebsocketCommunicator(application, "/ws/backtests/", headers=headers)
        connected, _ = await sockets[who.username].connect()
        assert connected
    try:
        await database_sync_to_async(backtest_sweep_execute)(sweep_id=sweep.pk)
        states = []
        while not states or states[-1]["status"] != RunStatus.DONE:
            message = json.loads(await sockets["alice"].receive_from(timeout=10))
            assert message["type"] == "backtest.sweep"
            states.append(message["sweep"])
        assert states[0]["status"] == RunStatus.RUNNING and states[-1]["points_done"] == 8
        assert await sockets["bob"].receive_nothing(timeout=0.5)
    finally:
        for socket in sockets.values():
            await socket.disconnect()
        await asyncio.sleep(0)


def _form(instrument: Any, **changes: Any) -> dict[str, Any]:
    return {
        "kind": "volume_breakout",
        "params": json.dumps({"bar_volume": "10"}),
        "grid": json.dumps({"lookback": [2, 3], "hold_bars": [1, 2]}),
        "metric": "pnl",
        "workers": "1",
        "instruments": [str(instrument.pk)],
        "start": "2026-11-30T12:00",
        "end": "2026-11-30T13:00",
        "capital": "10000",
        "quantity": "1",
        "order_type": "MARKET",
        "reversal": "after_exit_fill",
        "taker_bps": "5",
        "maker_bps": "2",
        "latency_ms": "0",
    } | changes


def test_the_page_refuses_a_bad_grid_and_starts_a_good_one(settings, held_threads) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    trader = user("trader")
    instrument = record_flipping_ticks()
    client = logged_in(trader)
    assert client.get("/backtests/sweeps/new/").status_code == 200
    bad = client.post("/backtests/sweeps/new/", _form(instrument, grid=json.dumps({"lookback": 3})))
    assert bad.status_code == 400 and b"non-empty list" in bad.content
    response = client.post("/backtests/sweeps/new/", _form(instrument))
    assert response.status_code == 302
    sweep = BacktestSweep.objects.get()
    assert response["Location"] == f"/backtests/sweeps/{sweep.pk}/"
    assert sweep.start_ns == START_NS and sweep.points_total == 4
    assert held_threads.finish() == [f"backtest-sweep-{sweep.pk}"]  # the background thread the page started
    assert BacktestSweep.objects.get(pk=sweep.pk).status == RunStatus.DONE
    page = client.get(f"/backtests/sweeps/{sweep.pk}/").content.decode()
    assert page.count('<tr data-index="') == 4
    assert f'href="/backtests/sweeps/{sweep.pk}/"' in client.get("/backtests/").content.decode()


def test_the_api_starts_lists_and_shows_only_the_callers_sweeps(settings, held_threads) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    alice, bob = user("alice"), user("bob")
    instrument = record_flipping_ticks()
    api = logged_in(alice)
    payload = {
        "kind": "volume_breakout",
        "params": {"bar_volume": "10"},
        "grid": {"lookback": [2, 3]},
        "metric": "sharpe",
        "workers": 1,
        "instruments": [instrument.pk],
        "start": "2026-11-30T12:00:00Z",
        "end": "2026-11-30T13:00:00Z",
        "capital": "10000",
        "quantity": "1",
    }
    bad = api.post("/api/backtest-sweeps/", payload | {"grid": {"lookback": []}}, content_type="application/json")
    assert bad.status_code == 400 and "grid" in bad.json()
    created = api.post("/api/backtest-sweeps/", payload, content_type="application/json")
    assert created.status_code == 201, created.content
    sweep_id = created.json()["id"]
    assert held_threads.finish() == [f"backtest-sweep-{sweep_id}"]
    assert BacktestSweep.objects.filter(pk=sweep_id, status=RunStatus.DONE).exists()
    detail = api.get(f"/api/backtest-sweeps/{sweep_id}/").json()
    assert detail["metric"] == "sharpe" and len(detail["results"]) == 2 and detail["best"] == detail["results"][0]
    assert [row["id"] for row in api.get("/api/backtest-sweeps/").json()["results"]] == [sweep_id]
    other = logged_in(bob)
    assert other.get(f"/api/backtest-sweeps/{sweep_id}/").status_code == 404
    assert other.get(f"/backtests/sweeps/{sweep_id}/").status_code == 404
    assert other.get("/api/backtest-sweeps/").json()["results"] == []


SPACE = {"fast": {"low": 2, "high": 6}, "slow": [8, 12]}


def test_an_optimizer_sweep_runs_its_trials_the_same_on_two_processes_as_on_one() -> None:
    trader = user("trader")
    instrument = record_walk_ticks()
    sweeps = []
    for workers in (2, 1):
        sweep = queued_sweep(trader, instrument, workers=workers, trials=8, **SPACE)
        assert "8 points over 1500 ticks" in backtest_sweep_execute(sweep_id=sweep.pk)
        sweep.refresh_from_db()
        sweeps.append(sweep)
    parallel, serial = sweeps
    assert parallel.status == serial.status == RunStatus.DONE and parallel.points_done == 8
    assert parallel.results == serial.results
    assert sorted(row["index"] for row in parallel.results) == list(range(8))
    assert all(2 <= row["params"]["fast"] <= 6 and row["params"]["slow"] in (8, 12) for row in parallel.results)
    pnls = [Decimal(row["figures"]["pnl"]) for row in parallel.results if not row["refused"]]
    assert pnls == sorted(pnls, reverse=True)


def test_the_page_and_the_api_start_an_optimizer_sweep_and_refuse_a_bad_space_by_field(settings, held_threads) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    trader = user("trader")
    instrument = record_flipping_ticks()
    client = logged_in(trader)
    space = json.dumps({"lookback": {"low": 2, "high": 4}, "hold_bars": [1, 2]})
    bad = client.post(
        "/backtests/sweeps/new/", _form(instrument, grid=json.dumps({"lookback": {"low": 5}}), trials="3")
    )
    assert bad.status_code == 400 and b"&#x27;lookback&#x27;" in bad.content
    # A range is a search space, not a grid: without trials it is refused as a grid.
    as_grid = client.post("/backtests/sweeps/new/", _form(instrument, grid=space))
    assert as_grid.status_code == 400 and b"non-empty list" in as_grid.content
    too_many = client.post("/backtests/sweeps/new/", _form(instrument, grid=space, trials="100000"))
    assert too_many.status_code == 400 and b"trials" in too_many.content
    response = client.post("/backtests/sweeps/new/", _form(instrument, grid=space, trials="5", seed="2"))
    assert response.status_code == 302
    sweep = BacktestSweep.objects.get()
    assert (sweep.trials, sweep.seed, sweep.points_total) == (5, 2, 5)
    assert held_threads.finish() == [f"backtest-sweep-{sweep.pk}"]
    assert BacktestSweep.objects.filter(pk=sweep.pk, status=RunStatus.DONE).exists()
    page = client.get(f"/backtests/sweeps/{sweep.pk}/").content.decode()
    assert page.count('<tr data-index="') == 5 and "optimizer: 5 trials" in page
    api = client.post(
        "/api/backtest-sweeps/",
        {
            "kind": "volume_breakout",
            "params": {"bar_volume": "10"},
            "grid": {"lookback": {"low": 2, "high": 4}},
            "trials": 3,
            "workers": 1,
            "instruments": [instrument.pk],
            "start": "2026-11-30T12:00:00Z",
            "end": "2026-11-30T13:00:00Z",
            "capital": "10000",
            "quantity": "1",
        },
        content_type="application/json",
    )
    assert api.status_code == 201, api.content
    assert api.json()["trials"] == 3 and api.json()["points_total"] == 3
    assert held_threads.finish() == [f"backtest-sweep-{api.json()['id']}"]
    assert BacktestSweep.objects.filter(pk=api.json()["id"], status=RunStatus.DONE).exists()
    assert len(client.get(f"/api/backtest-sweeps/{api.json()['id']}/").json()["results"]) == 3
