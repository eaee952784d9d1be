"""Watches every tick for positions whose trade setting has exit levels, and for daily loss limits.

Subscribed to the feed fan-out as "risk-watch" (the paper exchange's ticks). Which
positions it watches, with their entry price and levels, is read from the database
every `refresh_s` (one query), never per tick. A tick that reaches a level sends the
position's exit as a signal on its one account through the trade executor
(`TradeExecutor.handle_plan`, output id `risk-<level>-<uuid>`), so it is sized under the
position's row lock like any exit and can never close more than is open; the trigger
is audited (`risk.<level>`). A position whose exit was sent is not fired at again for
`refire_s` (a retry if the exit did not close it).

On the same refresh every account with a daily loss limit has its realized P&L since
00:00 UTC summed; reaching the limit engages the account's kill switch through the
injected `halt_entries` (the dashboard's switch, with the reason, audited; only a
person releases it). The entry gate (`orders.risk_limits.entry_risk_refusal`) refuses
entries meanwhile, so no entry slips in before the switch is engaged.

The best price since entry (for trailing stops) is kept in this process; after a
restart it starts again from the higher of the entry price and the first tick seen.

At a clean stop the watcher is a producer of intents: it stops firing first
(StopStage.INTAKE), before the executor drains and the final pass closes the books,
and lets the exits it already sent finish. A tick after that fires nothing; the
position is watched again after the restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from channels.db import database_sync_to_async
from django.db.models import OuterRef, Q, Subquery, Sum

from core.health import HealthBoard, Status
from core.runtime.core import Phase, RuntimeContext, StartupTask, StopStage
from feeds.market import FeedData, MarketData, fixed_from_decimal, fixed_to_decimal
from orders.audit import audit_record
from orders.db import in_db_thread
from orders.executor import TradeExecutor
from orders.manual import ExitOrder, ManualRefused, exit_order_for
from orders.models import Account, LedgerEntry, Position, TradeSetting
from orders.risk_limits import ExitLevels, average_price, better, exit_trigger, loss_reason, utc_day_start

if TYPE_CHECKING:
    from feeds.distribution.fanout import FeedFanout
    from orders.startup import OrdersHubs

log = logging.getLogger(__name__)

COMPONENT = "orders:risk-watch"
EntriesHalt = Callable[[int, str], object]


@dataclass
class Watched:
    position_id: int
    account_id: int
    side: str
    entry_price: int
    levels: ExitLevels
    best_price: int


def watched_positions() -> dict[tuple[str, str], list[Watched]]:
    """Open positions whose trade setting has an exit level, by (feed, venue symbol): one query."""
    setting = TradeSetting.objects.filter(account_id=OuterRef("account_id"), strategy_id=OuterRef("strategy_id"))
    rows = (
        Position.objects.filter(state=Position.State.OPEN, quantity__gt=0)
        .annotate(
            sl=Subquery(setting.values("stop_loss_pct")[:1]),
            tp=Subquery(setting.values("take_profit_pct")[:1]),
            trail=Subquery(setting.values("trailing_stop_pct")[:1]),
        )
        .filter(Q(sl__isnull=False) | Q(tp__isnull=False) | Q(trail__isnull=False))
        .values_list(
            "pk",
            "account_id",
            "side",
            "cost",
            "quantity",
            "instrument__feed__name",
            "instrument__venue_symbol",
            "sl",
            "tp",
            "trail",
        )
    )
    watched: dict[tuple[str, str], list[Watched]] = {}
    for pk, account_id, side, cost, quantity, feed, symbol, sl, tp, trail in rows:
        price = average_price(int(cost), int(quantity))
        levels = ExitLevels.from_percent(sl, tp, trail)
        watched.setdefault((feed, symbol), []).append(Watched(pk, account_id, side, price, levels, price))
    return watched


def loss_reasons(*, now: datetime | None = None) -> list[tuple[int, str]]:
    """(account, reason) of every account whose daily loss limit is reached: two queries for all accounts."""
    limits = dict(Account.objects.filter(daily_loss_limit__isnull=False).values_list("pk", "daily_loss_limit"))
    if not limits:
        return []
    realized = dict(
        LedgerEntry.objects.filter(account_id__in=limits, created_at__gte=utc_day_start(now))
        .values("account_id")
        .annotate(total=Sum("delta_realized_pnl"))
        .values_list("account_id", "total")
    )
    reasons = []
    for account_id, limit in sorted(limits.items()):
        if limit is None:
            continue
        reason = loss_reason(int(realized.get(account_id) or 0), fixed_from_decimal(limit))
        if reason:
            reasons.append((account_id, reason))
    return reasons


class RiskWatcher:
    def __init__(
        self,
        *,
        executor: TradeExecutor,
        halt_entries: EntriesHalt | None = None,
        health: HealthBoard | None = None,
        refresh_s: float = 1.0,
        loss_check_s: float = 5.0,
        refire_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._executor = executor
        self._halt_entries = halt_entries
        self._health = health
        self._refresh_s = refresh_s
        self._loss_check_s = loss_check_s
        self._loss_checked_at = float("-inf")
        self._refire_s = refire_s
        self._clock = clock
        self._watched: dict[tuple[str, str], list[Watched]] = {}
        self._best: dict[int, int] = {}
        self._fired: dict[int, float] = {}
        self._refreshed_at = float("-inf")
        self._tasks: set[asyncio.Task[None]] = set()
        self._halted: set[tuple[int, str]] = set()
        self._stopped = False
        self.triggers = 0

    async def consume(self, batch: FeedData) -> None:
        if self._stopped:
            return
        now = self._clock()
        if now - self._refreshed_at >= self._refresh_s:
            self._refreshed_at = now
            try:
                await self.refresh()
            except Exception as exc:  # a failed read must not stop the runtime: keep the last set, retry next time
                log.warning("orders risk-watch: refresh failed: %r", exc, exc_info=True)
                if self._health is not None:
                    self._health.set(COMPONENT, Status.DEGRADED, f"refresh failed, watching the last set: {exc!r}")
        if not self._watched:
            return
        for event in batch.events:
            if not isinstance(event, MarketData):
                continue
            for watched in self._watched.get((batch.feed, event.symbol), ()):
                self._tick(watched, event, now)

    async def refresh(self) -> None:
        """Re-read the watched positions and engage the kill switch of accounts past their daily loss."""
        watched = await database_sync_to_async(watched_positions)()
        alive = {w.position_id for rows in watched.values() for w in rows}
        for rows in watched.values():
            for w in rows:
                w.best_price = self._best.setdefault(w.position_id, w.entry_price)
        self._best = {pk: best for pk, best in self._best.items() if pk in alive}
        self._fired = {pk: at for pk, at in self._fired.items() if pk in alive}
        self._watched = watched
        now = self._clock()
        if self._halt_entries is not None and now - self._loss_checked_at >= self._loss_check_s:
            self._loss_checked_at = now
            for account_id, reason in await database_sync_to_async(loss_reasons)():
                if (account_id, reason) not in self._halted:
                    await database_sync_to_async(self._halt_entries)(account_id, reason)
                    await database_sync_to_async(audit_record)(
                        event="risk.daily_loss_limit", account_id=account_id, message=reason
                    )
                    self._halted.add((account_id, reason))
        if self._health is not None:
            self._health.set(
                COMPONENT, Status.HEALTHY, f"watching {len(alive)} positions with exit levels; {self.triggers} fired"
            )

    def _tick(self, watched: Watched, tick: MarketData, now: float) -> None:
        if self._stopped:  # the refresh awaited by this batch may have spanned the stop
            return
        best = better(watched.side, self._best.get(watched.position_id, watched.entry_price), tick.price)
        self._best[watched.position_id] = watched.best_price = best
        fired_at = self._fired.get(watched.position_id)
        if fired_at is not None and now - fired_at < self._refire_s:
            return
        level = exit_trigger(
            side=watched.side,
            entry_price=watched.entry_price,
            best_price=best,
            price=tick.price,
            levels=watched.levels,
        )
        if level is None:
            return
        self._fired[watched.position_id] = now
        self.triggers += 1
        task = asyncio.ensure_future(self._exit(watched, level, tick.price))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _exit(self, watched: Watched, level: str, price: int) -> None:
        try:
            order = await in_db_thread(_exit_order)(watched.position_id, level, price)
            if order is None:
                return
            await in_db_thread(audit_record)(
                event=f"risk.{level}",
                account_id=watched.account_id,
                strategy_id=order.signal.strategy_id,
                message=(
                    f"{order.target}: {level.replace('_', ' ')} at {fixed_to_decimal(price)} "
                    f"(entry {fixed_to_decimal(watched.entry_price)}, best {fixed_to_decimal(watched.best_price)})"
                ),
                details={"output_id": order.signal.output_id, "level": level},
            )
            outcome = await self._executor.handle_plan(order.signal, order.plan)
            log.info("orders risk-watch: %s exit of position %s: %s", level, watched.position_id, outcome)
        except ManualRefused as exc:
            log.warning("orders risk-watch: position %s not closed: %s", watched.position_id, exc)
        except Exception:  # one failed exit must not stop the watcher; it fires again after refire_s
            log.exception("orders risk-watch: %s exit of position %s failed", level, watched.position_id)

    def stop_firing(self) -> None:
        """Send no more exits, whatever the ticks say (the first step of a clean stop)."""
        self._stopped = True

    async def stop(self, timeout_s: float | None = None) -> None:
        """Wait up to `timeout_s` for the exits already sent to finish.

        An exit still working at the timeout is not cancelled: it is the executor's
        flow, which the executor's own drain waits for.
        """
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)


def _exit_order(position_id: int, level: str, price: int) -> ExitOrder | None:
    position = (
        Position.objects.filter(pk=position_id, state=Position.State.OPEN)
        .select_related("strategy", "instrument__feed", "account")
        .first()
    )
    if position is None:
        return None
    return exit_order_for(position, action=f"risk-{level.replace('_', '-')}", price=price)


def risk_watch_startup_tasks(
    hubs: OrdersHubs, *, fanout: FeedFanout | None, halt_entries: EntriesHalt | None
) -> list[StartupTask]:
    """DATA_FLOW, after the trade executor started: watch ticks for exit levels and daily losses."""

    async def start(ctx: RuntimeContext) -> None:
        from feeds.distribution.fanout import drain

        executor = hubs.trade_executor.get_or(None)
        if fanout is None or executor is None:
            ctx.health.set(COMPONENT, Status.HEALTHY, "no trade executor or ticks in this process: nothing to watch")
            return
        watcher = RiskWatcher(executor=executor, halt_entries=halt_entries, health=ctx.health)
        ctx.health.set(COMPONENT, Status.HEALTHY, "watching ticks for exit levels and daily loss limits")
        ctx.spawn(COMPONENT, drain("risk-watch", fanout.subscribe("risk-watch"), watcher.consume))

        async def stop(timeout_s: float) -> None:
            watcher.stop_firing()
            await watcher.stop(timeout_s * 0.9)

        # A producer of intents: it stops before the executor drains (StopStage.DRAIN).
        ctx.on_stop("risk-watch", stop, stage=StopStage.INTAKE)

    return [StartupTask("start-risk-watch", Phase.DATA_FLOW, start)]
