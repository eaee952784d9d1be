"""Orders test setup: a broker registry on the paper exchange and an executor over it."""

from __future__ import annotations

import pytest

from orders.brokers.paper import PaperFees
from orders.brokers.registry import BrokerRegistry
from orders.executor import ExecutorConfig, TradeExecutor
from orders.paper_matching import PaperMatcher


@pytest.fixture
def matcher() -> PaperMatcher:
    return PaperMatcher(fees=PaperFees(taker_bps=4, maker_bps=2), refresh_s=0.0)


@pytest.fixture
def registry(matcher: PaperMatcher) -> BrokerRegistry:
    return BrokerRegistry(on_paper_place=matcher.order_placed)


@pytest.fixture
def executor(registry: BrokerRegistry) -> TradeExecutor:
    return TradeExecutor(
        broker_for=lambda plan: registry.broker_for(account_id=plan.account_id, venue=plan.broker, mode=plan.mode),
        config=ExecutorConfig(),
    )
