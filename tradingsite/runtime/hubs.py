"""The runtime's hubs: one typed object, built by the composition root, with every
channel through which the apps' startup tasks hand each other work.

The data flows feeds -> processor -> orders: the feed fan-out feeds the processor,
the recorder, the paper broker and the publishers; the processor's signal hub feeds
the trade executor. Recovery's token state reaches the feeds and the brokers; the
dashboard's kill switches and the orders ledger's held positions reach the executor
and the processor as injected callables, so neither app imports the one above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.runtime.startup_value import StartupValue
from feeds.startup import FeedHubs
from orders.startup import EntryControls, OrdersHubs
from processor.held import HeldPositionLookup, nothing_held
from processor.startup import ProcessorHubs
from recovery.coordinator import AuthState


@dataclass(frozen=True, slots=True)
class RuntimeHubs:
    feeds: FeedHubs = field(default_factory=FeedHubs)
    processor: ProcessorHubs = field(default_factory=ProcessorHubs)
    orders: OrdersHubs = field(default_factory=OrdersHubs)
    auth_state: StartupValue[AuthState] = field(default_factory=lambda: StartupValue("token state"))
    # Seams the composition root fills from the apps above the processor and the executor.
    held_position: HeldPositionLookup = nothing_held
    controls: EntryControls = field(default_factory=EntryControls)
