"""The Upstox broker against a local fake of its order API, with tokens from a TokenSource."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from feeds.market import parse_fixed
from orders.brokers.base import BrokerRejected, BrokerUnavailable, OrderNotFound, OrderRequest
from orders.brokers.upstox import UpstoxBroker
from orders.models.lifecycle import OrderStatus
from recovery.tokens import AccessToken, TokenKey, TokenKind, TokenState, TokenStatus
from tests.fakes.brokers.upstox_orders import FakeUpstoxOrders


class StaticTokens:
    """A TokenSource holding one token; records invalidations."""

    def __init__(self, secret: str) -> None:
        self.key = TokenKey("upstox", TokenKind.OAUTH)
        self.token = AccessToken(secret)
        self.invalidated: list[tuple[str, str]] = []

    @property
    def status(self) -> TokenStatus:
        return TokenStatus(self.key, TokenState.VALID, fingerprint=self.token.fingerprint)

    async def await_valid_token(self) -> AccessToken:
        return self.token

    async def invalidate(self, fingerprint: str, reason: str) -> None:
        self.invalidated.append((fingerprint, reason))


@pytest.fixture
def venue() -> Iterator[FakeUpstoxOrders]:
    with FakeUpstoxOrders(valid_tokens={"good-token"}) as fake:
        yield fake


def _broker(venue: FakeUpstoxOrders, tokens: StaticTokens, *, sandbox: bool = False) -> UpstoxBroker:
    return UpstoxBroker(tokens=tokens, order_url=venue.base_url, api_url=venue.base_url, sandbox=sandbox, timeout_s=5)


REQUEST = OrderRequest(
    client_order_id="ts-3-0123456789abcdef",
    symbol="NSE_EQ|INE848E01016",
    side="BUY",
    order_type="LIMIT",
    quantity=parse_fixed("5"),
    price=parse_fixed("84.35"),
)


async def test_place_tags_the_order_and_finds_it_by_tag(venue: FakeUpstoxOrders) -> None:
    broker = _broker(venue, StaticTokens("good-token"))
    try:
        placed = await broker.place_order(REQUEST)
        assert placed.status == OrderStatus.NEW
        [body] = venue.place_bodies
        assert body["tag"] == REQUEST.client_order_id and body["quantity"] == 5 and body["price"] == 84.35
        found = await broker.fetch_order(client_order_id=REQUEST.client_order_id, symbol=REQUEST.symbol)
        assert found.exchange_order_id == placed.exchange_order_id and found.status == OrderStatus.SUBMITTED
        venue.execute(placed.exchange_order_id, 2, "84.35")
        [fill] = await broker.fills(symbols=[], since_ns=0)
        assert fill.quantity == parse_fixed("2") and fill.price == parse_fixed("84.35")
        canceled = await broker.cancel_order(
            client_order_id=REQUEST.client_order_id, exchange_order_id=placed.exchange_order_id, symbol=REQUEST.symbol
        )
        assert canceled.status == OrderStatus.CANCELED and canceled.filled_quantity == parse_fixed("2")
        with pytest.raises(OrderNotFound):
            await broker.fetch_order(client_order_id="ts-3-never", symbol=REQUEST.symbol)
    finally:
        await broker.close()


async def test_a_401_invalidates_the_token_it_was_sent_with(venue: FakeUpstoxOrders) -> None:
    tokens = StaticTokens("stale-token")
    broker = _broker(venue, tokens)
    try:
        with pytest.raises(BrokerRejected):
            await broker.place_order(REQUEST)
        assert [fp for fp, _ in tokens.invalidated] == [tokens.token.fingerprint]
        assert "UDAPI100050" in tokens.invalidated[0][1]
        assert not venue.orders
    finally:
        await broker.close()


async def test_sandbox_places_but_cannot_read_orders_back(venue: FakeUpstoxOrders) -> None:
    broker = _broker(venue, StaticTokens("good-token"), sandbox=True)
    try:
        await broker.place_order(REQUEST)
        with pytest.raises(BrokerUnavailable):
            await broker.open_orders(symbols=[])
    finally:
        await broker.close()
