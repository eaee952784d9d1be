"""Run the reconciliation passes of every account at once, so a broker that hangs delays only its accounts.

An account waiting for a broker login (or a venue that does not answer) spends its own
pass timeout; the other accounts' passes run meanwhile instead of queueing behind it.
Two orderings are kept:

- The passes of one account (one per trade mode) run one after another: they share the
  account's reconcile lease, which a concurrent pass would find taken and skip.
- Accounts trading through one venue key compare their combined exposure once, in the
  pass of the group's last account, after the others' fills are booked. That pass runs
  alongside the others and waits for them only at its exposure step. The comparing
  account is the group's highest account id and waits only for lower ids, while each
  account's own passes wait only for that account's earlier ones, so no wait is circular.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from orders.brokers.registry import BrokerNotConfigured, BrokerRegistry

# (account id, broker, trade mode): one reconciliation pass
Row = tuple[int, str, str]
BeforeExposure = Callable[[], Awaitable[None]]
R = TypeVar("R")


@dataclass(frozen=True)
class ExposurePlan:
    """Who compares a shared venue key's exposure, and whose passes that comparison waits for."""

    # row -> the accounts its broker's positions stand for; () for a group member that compares
    # nothing; a row on a key of its own is absent (it compares its own account).
    accounts: dict[Row, tuple[int, ...]]
    waits_for: dict[Row, tuple[Row, ...]]


def exposure_plan(registry: BrokerRegistry, rows: Sequence[Row]) -> ExposurePlan:
    """Group the passes by the broker they trade through (one venue key); the group's last row compares."""
    groups: dict[int, list[Row]] = {}
    for row in rows:
        account_id, venue, mode = row
        try:
            broker = registry.broker_for(account_id=account_id, venue=venue, mode=mode)
        except BrokerNotConfigured:
            continue
        groups.setdefault(id(broker), []).append(row)
    accounts: dict[Row, tuple[int, ...]] = {}
    waits_for: dict[Row, tuple[Row, ...]] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        for row in members[:-1]:
            accounts[row] = ()
        accounts[members[-1]] = tuple(sorted({account_id for account_id, _, _ in members}))
        waits_for[members[-1]] = tuple(members[:-1])
    return ExposurePlan(accounts, waits_for)


async def run_passes(
    rows: Sequence[Row],
    plan: ExposurePlan,
    run_pass: Callable[[Row, BeforeExposure | None], Awaitable[R]],
) -> list[R]:
    """Run `run_pass` for every row, accounts concurrently; results in the order of `rows`."""
    finished = {row: asyncio.Event() for row in rows}

    def before_exposure_of(row: Row) -> BeforeExposure | None:
        others = [finished[other] for other in plan.waits_for.get(row, ()) if other in finished]
        if not others:
            return None

        async def wait_for_the_others() -> None:
            for event in others:
                await event.wait()

        return wait_for_the_others

    async def passes_of_one_account(account_rows: list[Row]) -> list[R]:
        results: list[R] = []
        for row in account_rows:
            try:
                results.append(await run_pass(row, before_exposure_of(row)))
            finally:
                finished[row].set()  # a failed pass ends too: whoever waits for it must go on
        return results

    by_account: dict[int, list[Row]] = {}
    for row in rows:
        by_account.setdefault(row[0], []).append(row)
    per_account = await asyncio.gather(*(passes_of_one_account(account_rows) for account_rows in by_account.values()))
    done = {
        row: result
        for account_rows, results in zip(by_account.values(), per_account, strict=True)
        for row, result in zip(account_rows, results, strict=True)
    }
    return [done[row] for row in rows]
