"""The metrics sampler reads the processor's routes through its public counts."""

from __future__ import annotations

from processor.processor import Processor
from tests.processor.factories import RecordingSink, batch, spec, tick, turn
from tradingsite import metrics


async def test_routes_are_counted_by_state_and_sampled_into_the_gauges() -> None:
    processor = Processor(sink=RecordingSink())
    processor.start()
    processor.reconcile([spec(1, ["BTC"]), spec(2, ["ETH"])])
    await processor.settled()
    assert processor.route_state_counts() == {"active": 2, "stopping": 0, "degraded": 0}

    await processor.consume(batch(tick("BTC", 1, trade_id="long")))
    await turn()
    processor.reconcile([spec(2, ["ETH"])])  # strategy 1 holds a position: it stops, not at once
    await processor.settled()
    assert processor.route_state_counts() == {"active": 1, "stopping": 1, "degraded": 0}

    metrics.ProcessorSampler().sample(processor, None)
    assert metrics.ROUTES.labels("active")._value.get() == 1
    assert metrics.ROUTES.labels("stopping")._value.get() == 1
    assert metrics.DEGRADED_ROUTES._value.get() == 0
    await processor.stop()
