"""Backtest pages, API and websocket: bad input is a form error, each user sees only their own runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from backtesting.consumers import CLOSE_UNAUTHENTICATED
from backtesting.forms import BacktestRunForm
from backtesting.models import BacktestRun
from backtesting.push import progress_push
from orders.brokers.paper import PaperFees
from tests.backtesting.factories import BREAKOUT, queued_run
from tests.orders.factories import make_instrument
from tradingsite.asgi import application

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")


def user(name: str, **extra: Any) -> Any:
    return get_user_model().objects.create_user(name, password="pw-long-enough-123", **extra)


def logged_in(who: Any, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    client.force_login(who)
    return client


def form_data(instrument: Any, **changes: Any) -> dict[str, Any]:
    data = {
        "kind": "volume_breakout",
        "params": json.dumps(BREAKOUT),
        "instruments": [str(instrument.pk)],
        "start": "2026-11-30T12:00",
        "end": "2026-11-30T13:00",
        "capital": "10000",
        "quantity": "0.5",
        "order_type": "MARKET",
        "reversal": "after_exit_fill",
        "taker_bps": "5",
        "maker_bps": "2",
        "latency_ms": "0",
    }
    return data | changes


@pytest.mark.django_db
def test_a_valid_form_makes_the_request_with_the_instruments_steps() -> None:
    instrument = make_instrument()
    form = BacktestRunForm(form_data(instrument))
    assert form.is_valid(), form.errors
    request = form.run_request()
    assert request.feed == instrument.feed.name and request.symbols == [instrument.symbol]
    assert request.end_ns - request.start_ns == 3_600 * 1_000_000_000
    assert request.params == {"bar_volume": "10", "lookback": 3, "hold_bars": 2, "cooldown_bars": 0}
    assert (request.lot_size, request.tick_size) == (instrument.lot_size, instrument.tick_size)


BAD_INPUT = [
    ({"kind": "nope"}, "kind"),
    ({"params": '{"bar_volume": "x", "lookback": 3, "hold_bars": 2, "cooldown_bars": 0}'}, "params"),
    ({"params": '{"surprise": 1}'}, "params"),
    ({"params": "[1, 2]"}, "params"),
    ({"params": "{" * 5000}, "params"),
    ({"params": '{"a": "\\u0000"}'}, "params"),
    ({"params": '{"a": NaN}'}, "params"),
    ({"params": "x" * 20_000}, "params"),
    ({"instruments": []}, "instruments"),
    ({"instruments": ["999999"]}, "instruments"),
    ({"instruments": ["abc"]}, "instruments"),
    ({"instruments": ["99999999999999999999999"]}, "instruments"),
    ({"start": "yesterday"}, "start"),
    ({"end": "2026-11-30T11:00"}, "end"),
    ({"end": "2027-03-01T00:00"}, "end"),
    ({"capital": "0"}, "capital"),
    ({"capital": "-5"}, "capital"),
    ({"capital": "1e999999"}, "capital"),
    ({"quantity": "0.0000000000001"}, "quantity"),
    ({"quantity": "NaN"}, "quantity"),
    ({"taker_bps": "-1"}, "taker_bps"),
    ({"maker_bps": "10001"}, "maker_bps"),
    ({"latency_ms": "99999999999"}, "latency_ms"),
    ({"order_type": "STOP"}, "order_type"),
    ({"reversal": "sideways"}, "reversal"),
    ({"stop_loss_pct": "100"}, "stop_loss_pct"),
    ({"take_profit_pct": "0"}, "take_profit_pct"),
    ({"trailing_stop_pct": "0.00001"}, "trailing_stop_pct"),
    ({"max_open_positions": "0"}, "max_open_positions"),
    ({"daily_loss_limit": "-5"}, "daily_loss_limit"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "field"), BAD_INPUT)
def test_bad_input_is_a_form_error_on_its_field_and_starts_nothing(change: dict[str, Any], field: str) -> None:
    client = logged_in(user("trader"))
    response = client.post("/backtests/new/", form_data(make_instrument(), **change))
    assert response.status_code == 400
    assert field in response.context["form"].errors
    assert not BacktestRun.objects.exists()


@pytest.mark.django_db
def test_instruments_of_two_feeds_are_refused() -> None:
    first, second = make_instrument("sim"), make_instrument("other", "ETHUSDT")
    form = BacktestRunForm(form_data(first, instruments=[str(first.pk), str(second.pk)]))
    assert not form.is_valid()
    assert "one feed" in str(form.errors["instruments"])


@pytest.mark.django_db
def test_the_form_posts_a_run_and_shows_it(django_capture_on_commit_callbacks: Any) -> None:
    trader = user("trader")
    client = logged_in(trader)
    with django_capture_on_commit_callbacks(execute=False) as started:
        response = client.post("/backtests/new/", form_data(make_instrument()))
    run = BacktestRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/backtests/{run.pk}/"
    assert len(started) == 1  # the run is handed on only once its row is committed
    assert run.owner == trader and run.status == "queued"
    page = client.get(f"/backtests/{run.pk}/")
    assert b'id="run-progress"' in page.content
    assert client.get(f"/backtests/{run.pk}/state.json").json()["status"] == "queued"


@pytest.mark.django_db
def test_the_form_refuses_a_post_without_the_csrf_token() -> None:
    client = logged_in(user("trader"), enforce_csrf_checks=True)
    assert client.post("/backtests/new/", form_data(make_instrument())).status_code == 403
    assert not BacktestRun.objects.exists()


@pytest.mark.django_db
def test_each_user_lists_and_opens_only_their_own_runs_and_a_superuser_all() -> None:
    alice, bob, root = (
        user("alice"),
        user("bob"),
        get_user_model().objects.create_superuser("root", password="pw-long-enough-123"),
    )
    instrument = make_instrument()
    mine, theirs = queued_run(alice, instrument), queued_run(bob, instrument)
    client = logged_in(alice)
    listed = client.get("/backtests/").context["page"].object_list
    assert list(listed) == [mine]
    for url in (
        f"/backtests/{theirs.pk}/",
        f"/backtests/{theirs.pk}/state.json",
        f"/backtests/compare/?a={mine.pk}&b={theirs.pk}",
    ):
        assert client.get(url).status_code == 404, url
    assert client.get(f"/backtests/compare/?a={mine.pk}&b={mine.pk}").status_code == 200
    assert client.get("/backtests/compare/?a=x&b=1").status_code == 404
    assert set(logged_in(root).get("/backtests/").context["page"].object_list) == {mine, theirs}


@pytest.mark.django_db
def test_the_api_lists_and_details_only_the_callers_runs() -> None:
    alice, bob = user("alice"), user("bob")
    instrument = make_instrument()
    mine, theirs = queued_run(alice, instrument), queued_run(bob, instrument)
    BacktestRun.objects.filter(pk=mine.pk).update(status="done", report={"trades": 2, "pnl": "1.5"})
    client = logged_in(alice)
    listed = client.get("/api/backtests/").json()["results"]
    assert [row["id"] for row in listed] == [mine.pk]
    assert listed[0]["summary"]["pnl"] == "1.5" and "report" not in listed[0]
    detail = client.get(f"/api/backtests/{mine.pk}/").json()
    assert detail["report"] == {"trades": 2, "pnl": "1.5"}
    assert detail["capital"] == "10000.000000000000"
    assert client.get(f"/api/backtests/{theirs.pk}/").status_code == 404
    assert Client().get("/api/backtests/").status_code == 401


@pytest.mark.django_db
def test_the_api_starts_a_run_with_the_forms_validation(django_capture_on_commit_callbacks: Any) -> None:
    trader = user("trader")
    client = logged_in(trader)
    instrument = make_instrument()
    body = {
        "kind": "volume_breakout",
        "params": BREAKOUT,
        "instruments": [instrument.pk],
        "start": "2026-11-30T12:00:00Z",
        "end": "2026-11-30T12:30:00Z",
        "capital": "5000",
        "quantity": "1",
    }
    with django_capture_on_commit_callbacks(execute=False):
        created = client.post("/api/backtests/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    run = BacktestRun.objects.get(pk=created.json()["id"])
    assert run.owner == trader and run.taker_bps == PaperFees().taker_bps and run.capital == 5000
    bad = client.post(
        "/api/backtests/", body | {"params": {"lookback": "x"}, "capital": "0"}, content_type="application/json"
    )
    assert bad.status_code == 400
    assert set(bad.json()) == {"params", "capital"}
    assert client.post("/api/backtests/", [1], content_type="application/json").status_code == 400
    assert client.post("/api/backtests/", "{" * 3000, content_type="application/json").status_code == 400
    assert BacktestRun.objects.count() == 1


@database_sync_to_async
def _cookie(who: Any) -> bytes:
    return f"sessionid={logged_in(who).cookies['sessionid'].value}".encode()


async def _socket(cookie: bytes | None) -> WebsocketCommunicator:
    headers = [ORIGIN, HOST] + ([(b"cookie", cookie)] if cookie else [])
    communicator = WebsocketCommunicator(application, "/ws/backtests/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_progress_reaches_only_the_owners_sockets() -> None:
    alice, bob = await database_sync_to_async(user)("alice"), await database_sync_to_async(user)("bob")
    run = await database_sync_to_async(lambda: queued_run(alice, make_instrument()))()
    alice_socket, bob_socket = await _socket(await _cookie(alice)), await _socket(await _cookie(bob))
    run.ticks_done, run.ticks_total = 50, 200
    await database_sync_to_async(progress_push)(run)
    message = await alice_socket.receive_json_from(timeout=2)
    assert message == {
        "type": "backtest.progress",
        "run": {"id": run.pk, "status": "queued", "ticks_done": 50, "ticks_total": 200, "progress": 0.25, "error": ""},
    }
    assert await bob_socket.receive_nothing(timeout=0.2)
    await alice_socket.send_to(text_data='{"type": "backtest.progress", "run": {}}')  # ignored
    assert await alice_socket.receive_nothing(timeout=0.1)
    await alice_socket.disconnect()
    await bob_socket.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_an_anonymous_socket_is_closed_unauthenticated() -> None:
    anonymous = await _socket(None)
    closed = await anonymous.receive_output(timeout=2)
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}


@pytest.mark.django_db(transaction=True)
async def test_a_run_in_a_background_thread_pushes_through_the_web_processs_loop() -> None:
    alice = await database_sync_to_async(user)("alice")
    run = await database_sync_to_async(lambda: queued_run(alice, make_instrument()))()
    browser = await _socket(await _cookie(alice))
    run.status = "running"
    await asyncio.to_thread(progress_push, run, loop=asyncio.get_running_loop())
    message = await browser.receive_json_from(timeout=2)
    assert message["run"]["status"] == "running"
    await browser.disconnect()


@pytest.mark.django_db
def test_run_again_fills_the_form_with_your_run_and_posting_it_starts_the_same_run(
    django_capture_on_commit_callbacks: Any,
) -> None:
    owner, other = user("owner"), user("other")
    instrument = make_instrument()
    client = logged_in(owner)
    data = form_data(instrument, kind="ema", params='{"timeframe_s": 30, "fast": 3, "slow": 8}', stop_loss_pct="1.5")
    with django_capture_on_commit_callbacks():
        client.post("/backtests/new/", data)
    first = BacktestRun.objects.get()
    assert f'href="/backtests/new/?from={first.pk}"' in client.get(f"/backtests/{first.pk}/").content.decode()
    page = client.get(f"/backtests/new/?from={first.pk}")
    form = page.context["form"]
    again = {name: form[name].value() for name in form.fields}
    assert again["kind"] == "ema" and json.loads(again["params"]) == first.params
    assert again["instruments"] == [instrument.pk] and again["start"] == "2026-11-30T12:00"
    assert str(again["stop_loss_pct"]) == "1.5000" and again["taker_bps"] == 5
    with django_capture_on_commit_callbacks():
        client.post("/backtests/new/", {k: v for k, v in again.items() if v is not None})
    second = BacktestRun.objects.exclude(pk=first.pk).get()
    fields = ("kind", "params", "feed", "symbols", "start_ns", "end_ns", "capital", "quantity", "order_type")
    fields += ("reversal", "taker_bps", "maker_bps", "latency_ms", "stop_loss_pct", "take_profit_pct")
    assert [getattr(second, f) for f in fields] == [getattr(first, f) for f in fields]
    assert logged_in(other).get(f"/backtests/new/?from={first.pk}").status_code == 404  # not theirs
    assert client.get("/backtests/new/?from=abc").status_code == 404
