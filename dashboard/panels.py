"""What each dashboard panel shows, for one user: built once per render, from selectors.

A panel is a template under templates/dashboard/ plus a function here returning its
context; the page renders them all, and /dashboard/panels/<name>/ renders one so the
browser can refresh a panel in place when a pushed event says it changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from core.fixed_point import fixed_to_str
from core.selectors import component_health_effective
from dashboard import selectors
from dashboard.chart_history import TIMEFRAMES
from dashboard.decisions import unresolved_panel
from dashboard.kill_bar import kill_bar_panel
from dashboard.manual_control import manual_panel
from dashboard.pnl import unrealized_pnl
from feeds.market import fixed_from_decimal
from feeds.models import Instrument
from orders.outcomes import outcome_event

RECENT_ROWS = 25
# Signals drawn on the charts when the page loads (dashboard.js keeps at most 200 per chart).
CHART_SIGNALS = 200


@dataclass(frozen=True)
class PositionRow:
    position: Any
    quantity: str
    average_price: str
    realized_pnl: str
    last_price: str | None
    unrealized_pnl: str | None
    unrealized_sign: int
    cost: str  # for the browser's live mark-to-market (exact, in fixed point there too)
    multiplier: str


def _money(value: int | None) -> str | None:
    return None if value is None else fixed_to_str(value)


def prices_panel(user: User) -> dict[str, Any]:
    visible = selectors.visible_strategy_ids(user_id=user.pk)
    instruments = (
        Instrument.objects.filter(feed__enabled=True, subscriptions__enabled=True, subscriptions__channel="trades")
        .select_related("feed")
        .prefetch_related("strategies")
        .distinct()
    )
    rows: list[dict[str, Any]] = []
    for instrument in instruments:
        strategies = [s for s in instrument.strategies.all() if s.pk in visible]
        rows.append({"instrument": instrument, "strategies": strategies})
    symbols = {(row["instrument"].feed.name, row["instrument"].venue_symbol): row["instrument"].symbol for row in rows}
    return {"instruments": rows, "chart_signals": chart_signals(user, symbols), "timeframes": list(TIMEFRAMES)}


def chart_signals(user: User, symbols: dict[tuple[str, str], str]) -> list[dict[str, Any]]:
    """The recent signals of the charted instruments with their outcomes, oldest first, shaped like the live pushes.

    A reload draws the same markers the live page had: traded, not traded (and why) or pending.
    """
    recent = selectors.signals_for_user(user).order_by("-emitted_at", "-id")[:CHART_SIGNALS]
    drawn: list[dict[str, Any]] = []
    for signal in reversed(selectors.signal_outcomes_attach(user, recent)):
        symbol = symbols.get((signal.feed, signal.symbol))
        if symbol is None:
            continue
        drawn.append(
            {
                "strategy_id": signal.strategy_id,
                "strategy": signal.strategy_name,
                "feed": signal.feed,
                "symbol": symbol,
                "venue_symbol": signal.symbol,
                "kind": signal.kind,
                "price": fixed_to_str(signal.price_fixed),
                "emitted_ms": int(signal.emitted_at.timestamp() * 1000),
                "occurrence_time_ms": signal.occurrence_ns // 1_000_000,
                "output_id": signal.output_id,
                "outcomes": [
                    {**outcome_event(row), "account_name": row.account.name if row.account else ""}
                    for row in signal.visible_outcomes  # type: ignore[attr-defined]
                ],
            }
        )
    drawn.sort(key=lambda row: row["occurrence_time_ms"])  # the chart needs its times in order
    return drawn


def signals_panel(user: User) -> dict[str, Any]:
    recent = selectors.signals_for_user(user).order_by("-emitted_at", "-id")[:RECENT_ROWS]
    return {"signals": selectors.signal_outcomes_attach(user, recent)}


def trading_panel(user: User) -> dict[str, Any]:
    positions = []
    for position in selectors.positions_for_user(user).filter(state="OPEN")[:RECENT_ROWS]:
        last_price: int | None = position.last_price  # type: ignore[attr-defined]  # annotated by the selector
        pnl = unrealized_pnl(
            side=position.side,
            quantity=position.quantity,
            cost=position.cost,
            last_price=last_price,
            multiplier=fixed_from_decimal(position.instrument.contract_multiplier),
        )
        average = position.average_price
        positions.append(
            PositionRow(
                position=position,
                quantity=fixed_to_str(position.quantity),
                average_price="–" if average is None else str(average),
                realized_pnl=fixed_to_str(position.realized_pnl),
                last_price=_money(last_price),
                unrealized_pnl=_money(pnl),
                unrealized_sign=0 if not pnl else (1 if pnl > 0 else -1),
                cost=fixed_to_str(position.cost),
                multiplier=fixed_to_str(fixed_from_decimal(position.instrument.contract_multiplier)),
            )
        )
    return {
        "positions": positions,
        "orders": list(selectors.orders_for_user(user)[:RECENT_ROWS]),
        "fills": list(selectors.fills_for_user(user)[:RECENT_ROWS]),
    }


def accounts_panel(user: User) -> dict[str, Any]:
    halted = selectors.entries_halted_by_account(user)
    switches = selectors.kill_switches_for_user(user)
    accounts = []
    for account in selectors.accounts_with_ledger_for_user(user):
        ledger = getattr(account, "ledger", None)
        figures = (
            None
            if ledger is None
            else {
                key: fixed_to_str(value)
                for key, value in (
                    ("allocated", ledger.allocated_capital),
                    ("reserved_for_orders", ledger.reserved_for_orders),
                    ("reserved_for_positions", ledger.reserved_for_positions),
                    ("realized_pnl", ledger.realized_pnl),
                    ("available", ledger.available),
                )
            }
        )
        switch = switches.get(selectors.account_scope(account.pk))
        accounts.append(
            {
                "account": account,
                "ledger": figures,
                "halted": halted.get(account.pk),
                "switch_engaged": bool(switch and switch.engaged),
            }
        )
    global_switch = switches.get(selectors.GLOBAL_SCOPE)
    return {
        "accounts": accounts,
        "global_engaged": bool(global_switch and global_switch.engaged),
        "global_reason": global_switch.reason if global_switch else "",
        "journal": list(selectors.ledger_entries_for_user(user).select_related("account")[:RECENT_ROWS]),
    }


def controls_panel(user: User) -> dict[str, Any]:
    return {
        "trade_settings": list(selectors.trade_settings_for_user(user).order_by("strategy__name", "account__name")),
        "strategies": list(selectors.strategies_for_user(user).order_by("name")),
        "audit": list(selectors.control_audit_for_user(user)[:10]),
    }


def health_panel(user: User) -> dict[str, Any]:
    if not user.is_staff:
        return {"components": None}
    return {"components": component_health_effective()}


PANELS: dict[str, Callable[[User], dict[str, Any]]] = {
    "prices": prices_panel,
    "signals": signals_panel,
    "trading": trading_panel,
    "accounts": accounts_panel,
    "controls": controls_panel,
    "health": health_panel,
    "unresolved": unresolved_panel,
    "manual": manual_panel,
    "kill_bar": kill_bar_panel,
}


def panel_context(name: str, user: User) -> dict[str, Any]:
    return PANELS[name](user)
