"""Write paths of the processor app."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from django.db import transaction

from processor.models import Strategy, StrategyOutputRecord, StrategySignal
from processor.outputs import StrategyOutput
from processor.signals import Signal
from processor.strategies import output_json_values


def _aware(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


def strategy_events_persist(
    *,
    signals: Sequence[tuple[Signal, StrategyOutput]],
    outputs: Sequence[StrategyOutput],
) -> None:
    """Store signals with the outputs they link to, and the given outputs (duplicates ignored).

    A strategy deleted meanwhile leaves its rows with a null strategy and its name.
    """
    all_outputs = {output.output_id: output for output in outputs}
    for _, output in signals:
        all_outputs[output.output_id] = output
    strategy_ids = {s.strategy_id for s, _ in signals} | {o.strategy_id for o in all_outputs.values()}
    existing = set(Strategy.objects.filter(pk__in=strategy_ids).values_list("pk", flat=True))
    with transaction.atomic():
        StrategyOutputRecord.objects.bulk_create(
            [
                StrategyOutputRecord(
                    output_id=output.output_id,
                    strategy_id=output.strategy_id if output.strategy_id in existing else None,
                    strategy_name=output.strategy_name,
                    feed=output.feed,
                    symbol=output.symbol,
                    time_ns=output.time_ns,
                    occurrence_ns=output.occurrence_ns,
                    values=output_json_values(output),
                )
                for output in all_outputs.values()
            ],
            ignore_conflicts=True,
        )
        StrategySignal.objects.bulk_create(
            [
                StrategySignal(
                    strategy_id=signal.strategy_id if signal.strategy_id in existing else None,
                    strategy_name=signal.strategy_name,
                    feed=signal.feed,
                    symbol=signal.symbol,
                    kind=signal.kind.value,
                    price_fixed=signal.price,
                    emitted_at=_aware(signal.emitted_ns),
                    occurrence_ns=signal.occurrence_ns,
                    output_id=signal.output_id,
                )
                for signal, _ in signals
            ]
        )
