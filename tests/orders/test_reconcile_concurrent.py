"""Reconciliation passes run per account at once: accounts whose broker hangs do not hold up the others.

Two Upstox accounts trade through a local server that accepts connections and never
answers (a broker stuck behind a pending login looks the same from here); a paper
account next to them has an orphan to adopt. Its pass finishes while both hung passes
are still waiting, each on its own timeout, and the hung ones end as skipped.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from channels.db import database_sync_to_async

from orders.brokers.base import OrderRequest
from orders.brokers.paper import PaperBroker
from orders.brokers.registry import BrokerRegistry
from orders.brokers.upstox import UpstoxBroker
from orders.lifecycle import intent_create
from orders.models import Order
from orders.reconcile_runner import exposure_plan, run_passes
from orders.services import reconcile_all
from tests.helpers import async_eventually
from tests.orders.factories import make_setup, market_entry_spec
from tests.orders.test_upstox_broker import StaticTokens

pytestmark = pytest.mark.django_db(transaction=True)


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte; counts requests waiting on it."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(5)
            try:
                conn.recv(65536)  # the request arrived; it is never answered
            except OSError:
                pass
            with self._lock:
                self._held.append(conn)

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._held)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for conn in self._held:
            conn.close()
        self._listener.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def _registry(silent: SilentServer) -> BrokerRegistry:
    def upstox() -> UpstoxBroker:
        # The broker's own HTTP timeout is long: the pass timeout is what ends the wait.
        return UpstoxBroker(
            tokens=StaticTokens("good-token"), order_url=silent.url, api_url=silent.url, sandbox=False, timeout_s=120
        )

    return BrokerRegistry(factories={("upstox", "live"): upstox})


async def test_a_healthy_account_reconciles_while_two_accounts_wait_on_a_broker_that_never_answers(
    silent: SilentServer,
) -> None:
    stuck = [await database_sync_to_async(make_setup)(broker="upstox", mode="live") for _ in range(2)]
    healthy = await database_sync_to_async(make_setup)()
    spec = market_entry_spec(healthy, f"ts-{healthy.account.pk}-orphan0000000001")
    await database_sync_to_async(intent_create)(spec=spec)
    await PaperBroker(account_key=str(healthy.account.pk)).place_order(
        OrderRequest(spec.client_order_id, "BTCUSDT", "BUY", "MARKET", spec.quantity, None)
    )
    registry = _registry(silent)
    running = asyncio.create_task(reconcile_all(registry=registry, timeout_s=20))
    try:

        async def adopted() -> bool:
            return await Order.objects.filter(client_order_id=spec.client_order_id).aexists()

        await async_eventually(adopted, timeout_s=15)
        # The healthy account is done while both stuck accounts still wait, side by side
        # (one after another, the second would not have asked yet).
        await async_eventually(lambda: _true_when(silent.waiting == 2), timeout_s=15)
        assert not running.done()
        results = await running
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await registry.close()
    by_account = {result.account_id: result for result in results}
    assert [result.account_id for result in results] == sorted(by_account)  # reported in account order
    assert by_account[healthy.account.pk].corrections == {"Adopt": 1} and not by_account[healthy.account.pk].skipped
    for setup in stuck:
        assert "did not answer within 20s" in by_account[setup.account.pk].skipped


async def _true_when(value: bool) -> bool:
    return value


async def test_the_passes_of_one_account_run_in_turn_and_a_shared_key_compares_after_the_others() -> None:
    order: list[str] = []
    first_may_finish = asyncio.Event()
    rows = [(1, "upstox", "live"), (1, "upstox", "sandbox"), (2, "upstox", "live")]
    registry = BrokerRegistry(
        factories={
            ("upstox", "live"): lambda: PaperBroker(account_key="x"),
            ("upstox", "sandbox"): lambda: PaperBroker(account_key="y"),
        }
    )
    plan = exposure_plan(registry, rows)
    assert plan.accounts == {(1, "upstox", "live"): (), (2, "upstox", "live"): (1, 2)}
    assert plan.waits_for == {(2, "upstox", "live"): ((1, "upstox", "live"),)}

    async def run_pass(row: tuple[int, str, str], before_exposure: object) -> str:
        name = f"{row[0]}:{row[2]}"
        order.append(f"start {name}")
        if row == (1, "upstox", "live"):
            await first_may_finish.wait()
        if before_exposure is not None:
            order.append(f"{name} waits to compare")
            await before_exposure()  # type: ignore[operator]
            order.append(f"{name} compares")
        order.append(f"end {name}")
        return name

    running = asyncio.create_task(run_passes(rows, plan, run_pass))
    await async_eventually(lambda: _true_when("2:live waits to compare" in order), timeout_s=5)
    # Account 2 started beside account 1; account 1's second pass waits for its first.
    assert order == ["start 1:live", "start 2:live", "2:live waits to compare"]
    first_may_finish.set()
    assert await running == ["1:live", "1:sandbox", "2:live"]
    assert order.index("2:live compares") > order.index("end 1:live")
    assert order.index("start 1:sandbox") > order.index("end 1:live")
