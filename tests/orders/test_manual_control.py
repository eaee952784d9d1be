"""Manual control runs through the trade executor: a close, a flatten, a cancel and an entry on the paper exchange."""

from __future__ import annotations

from decimal import Decimal

import pytest
from channels.db import database_sync_to_async

from feeds.market import FeedData
from orders import manual
from orders.brokers.registry import BrokerRegistry
from orders.executor import TradeExecutor
from orders.ledger import ledger_check
from orders.manual import ManualDesk, ManualRefused, parse_quantity
from orders.models import Order, PaperOrder, Position, SignalOutcome
from orders.paper_matching import PaperMatcher
from processor.signals import SignalKind
from tests.orders.factories import make_instrument, make_setup, make_signal, tick

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def desk(executor: TradeExecutor, registry: BrokerRegistry) -> ManualDesk:
    return ManualDesk(executor=executor, registry=registry)


async def _open_long(executor: TradeExecutor, matcher: PaperMatcher, setup, price: str = "100") -> Position:  # type: ignore[no-untyped-def]
    assert set(await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, price))) == {"placed"}
    await matcher.consume(FeedData("sim", (tick(price, "50"),)))
    return await database_sync_to_async(Position.objects.get)(account=setup.account, state="OPEN")


async def test_a_manual_close_is_an_exit_signal_on_that_account_only_and_closes_in_the_ledger(
    executor: TradeExecutor, matcher: PaperMatcher, desk: ManualDesk
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="100000")
    # Another account trades the same strategy: a manual close must not touch it.
    other = await database_sync_to_async(make_setup)(
        quantity="1", capital="100000", strategy=setup.strategy, instrument=setup.instrument
    )
    position = await _open_long(executor, matcher, setup)
    owner = await database_sync_to_async(lambda: setup.account.owner)()

    result = await manual.position_close(user=owner, position_id=position.pk, desk=desk)
    assert result.outcome == "placed" and result.client_order_id.startswith(f"ts-{setup.account.pk}-")
    await matcher.consume(FeedData("sim", (tick("101", "50"),)))

    closed = await database_sync_to_async(Position.objects.get)(pk=position.pk)
    assert closed.state == "CLOSED" and closed.quantity == 0
    assert (await database_sync_to_async(ledger_check)(account_id=setup.account.pk)).ok
    outcome = await database_sync_to_async(SignalOutcome.objects.get)(client_order_id=result.client_order_id)
    assert outcome.output_id.startswith("manual-close-") and outcome.signal_kind == "EXIT_LONG"
    assert await database_sync_to_async(Position.objects.filter(account=other.account, state="OPEN").count)() == 1


async def test_another_users_position_is_not_found(
    executor: TradeExecutor, matcher: PaperMatcher, desk: ManualDesk
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="100000")
    stranger = await database_sync_to_async(make_setup)()
    position = await _open_long(executor, matcher, setup)
    intruder = await database_sync_to_async(lambda: stranger.account.owner)()
    with pytest.raises(Position.DoesNotExist):
        await manual.position_close(user=intruder, position_id=position.pk, desk=desk)
    assert await database_sync_to_async(Position.objects.filter(pk=position.pk, state="OPEN").exists)()


async def test_flatten_closes_every_position_and_cancels_a_working_entry(
    executor: TradeExecutor, matcher: PaperMatcher, desk: ManualDesk
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="1000000")
    await _open_long(executor, matcher, setup)
    eth = await database_sync_to_async(make_instrument)("sim", "ETHUSDT")
    await database_sync_to_async(setup.strategy.instruments.add)(eth)
    # A limit entry on ETH that never trades through: a working order, no quantity yet.
    await database_sync_to_async(
        lambda: type(setup.setting).objects.filter(pk=setup.setting.pk).update(order_type="LIMIT")
    )()
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "10", symbol="ETHUSDT")) == [
        "placed"
    ]
    owner = await database_sync_to_async(lambda: setup.account.owner)()

    results = await manual.account_flatten(user=owner, account_id=setup.account.pk, desk=desk)
    assert sorted(r.outcome for r in results) == ["CANCELED", "placed"] or sorted(r.outcome for r in results) == [
        "no_position",
        "placed",
    ]
    await matcher.consume(FeedData("sim", (tick("100", "50"),)))
    assert not await database_sync_to_async(
        Position.objects.filter(account=setup.account, state="OPEN", quantity__gt=0).exists
    )()
    working = await database_sync_to_async(
        lambda: list(Order.objects.filter(account=setup.account).exclude(status__in=["FILLED", "CANCELED"]))
    )()
    assert working == []
    assert (await database_sync_to_async(ledger_check)(account_id=setup.account.pk)).ok


async def test_a_manual_cancel_releases_the_reservation(
    executor: TradeExecutor, matcher: PaperMatcher, desk: ManualDesk
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="100000", order_type="LIMIT")
    assert await executor.handle(make_signal(setup.strategy, SignalKind.ENTRY_LONG, "100")) == ["placed"]
    order = await database_sync_to_async(Order.objects.get)(account=setup.account)
    owner = await database_sync_to_async(lambda: setup.account.owner)()

    result = await manual.order_cancel(user=owner, order_id=order.pk, desk=desk)
    assert result.outcome == "CANCELED"
    assert (await database_sync_to_async(PaperOrder.objects.get)(client_order_id=order.client_order_id)).status == (
        "CANCELED"
    )
    ledger = await database_sync_to_async(lambda: type(setup.account).objects.get(pk=setup.account.pk).ledger)()
    assert ledger.reserved_for_orders == 0
    assert (await database_sync_to_async(ledger_check)(account_id=setup.account.pk)).ok


async def test_a_manual_entry_is_sized_from_the_setting_or_the_given_quantity(
    executor: TradeExecutor, matcher: PaperMatcher, desk: ManualDesk
) -> None:
    setup = await database_sync_to_async(make_setup)(quantity="1", capital="100000")
    await database_sync_to_async(setup.strategy.instruments.add)(setup.instrument)
    owner = await database_sync_to_async(lambda: setup.account.owner)()
    with pytest.raises(ManualRefused, match="no trade"):  # no price recorded yet
        await manual.manual_entry(
            user=owner,
            trade_setting_id=setup.setting.pk,
            instrument_id=setup.instrument.pk,
            side="LONG",
            quantity=None,
            desk=desk,
        )
    from feeds.market import parse_fixed
    from feeds.models import Tick

    await database_sync_to_async(Tick.objects.create)(
        instrument=setup.instrument, ts_event=1, ts_recv=1, price=parse_fixed("100"), volume=parse_fixed("1")
    )
    result = await manual.manual_entry(
        user=owner,
        trade_setting_id=setup.setting.pk,
        instrument_id=setup.instrument.pk,
        side="SHORT",
        quantity=Decimal("0.5"),
        desk=desk,
    )
    assert result.outcome == "placed"
    await matcher.consume(FeedData("sim", (tick("100", "50"),)))
    position = await database_sync_to_async(Position.objects.get)(account=setup.account, state="OPEN")
    assert position.side == "SHORT" and position.quantity == 500_000_000_000


@pytest.mark.parametrize("text", ["abc", "-1", "0", "NaN", "inf", "1e400", "0.0000000000001", "1" * 30])
def test_a_bad_quantity_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(ManualRefused, match="quantity"):
        parse_quantity(text)


def test_a_blank_quantity_means_the_settings_own() -> None:
    assert parse_quantity("  ") is None and parse_quantity("0.25") == Decimal("0.25")
