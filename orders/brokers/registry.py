"""Which broker serves an account: paper by default, a real venue when its account says so.

One broker object per (venue, mode) is shared by the accounts on it (one
exchange key, many profiles, isolated by client-id prefix and per-account ledgers);
the paper broker keeps one book per account.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from orders.brokers.base import Broker
from orders.brokers.kinds import PAPER
from orders.brokers.paper import PaperBroker


class BrokerNotConfigured(LookupError):
    """An account names a venue this process has no credentials or token for."""


@dataclass
class BrokerRegistry:
    paper_latency_s: float = 0.0
    # (venue, mode) -> factory; filled from the broker kinds by orders.services.broker_registry_from_settings
    factories: dict[tuple[str, str], Callable[[], Broker]] = field(default_factory=dict)
    on_paper_place: Callable[[str], None] | None = None
    _brokers: dict[tuple[str, str], Broker] = field(default_factory=dict)

    def broker_for(self, *, account_id: int, venue: str, mode: str) -> Broker:
        if venue == PAPER:
            key = (PAPER, str(account_id))
            if key not in self._brokers:
                self._brokers[key] = PaperBroker(
                    account_key=str(account_id), latency_s=self.paper_latency_s, on_place=self.on_paper_place
                )
            return self._brokers[key]
        key = (venue, mode)
        if key not in self._brokers:
            factory = self.factories.get(key)
            if factory is None:
                raise BrokerNotConfigured(f"no {venue} broker configured for {mode} trading")
            self._brokers[key] = factory()
        return self._brokers[key]

    async def close(self) -> None:
        brokers, self._brokers = list(self._brokers.values()), {}
        for broker in brokers:
            await broker.close()
