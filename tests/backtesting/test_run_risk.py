"""A stored run and a sweep traded under exit levels and account limits, from the form to the report."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from backtesting.forms import BacktestRunForm
from backtesting.models import BacktestRun, RunStatus
from backtesting.services import backtest_run_execute, simulated_settings_of
from feeds.market import parse_fixed
from orders.risk_limits import AccountLimits, ExitLevels
from tests.backtesting.factories import START_NS, queued_run, record_walk_ticks
from tests.backtesting.test_run_pages import form_data
from tests.orders.factories import make_instrument

pytestmark = pytest.mark.django_db(transaction=True)  # the ticks are read by a thread of its own


@pytest.fixture
def trader():
    return get_user_model().objects.create_user("trader", password="pw-long-enough-123")


def finished_walk_run(trader, **terms: Decimal) -> BacktestRun:
    """A seeded random walk (0.2 % a tick) traded by slow averages under a tight stop-loss, run to the end."""
    run = queued_run(
        trader,
        record_walk_ticks(),
        kind="ema",
        params={"timeframe_s": 30, "fast": 3, "slow": 8},
        end_ns=START_NS + 3_600 * 1_000_000_000,
        quantity=Decimal("0.1"),
        stop_loss_pct=Decimal("0.3"),
        max_open_positions=1,
        **terms,
    )
    backtest_run_execute(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_a_run_with_a_stop_loss_reports_its_exits_by_reason(trader) -> None:
    run = finished_walk_run(trader, trailing_stop_pct=Decimal("0.5"))
    assert run.status == RunStatus.DONE, run.error
    reasons = {row["key"]: row["trades"] for row in run.report["per_exit_reason"]}
    assert reasons.get("stop_loss", 0) > 0 and reasons.get("trailing_stop", 0) > 0, reasons
    counts = run.report["risk_event_counts"]
    assert counts["risk.stop_loss"] == reasons["stop_loss"] and counts["risk.trailing_stop"] == reasons["trailing_stop"]
    assert len(run.report["risk_events"]) == sum(counts.values())


def test_the_form_carries_the_risk_terms_to_the_simulated_settings(trader) -> None:
    form = BacktestRunForm(
        form_data(
            make_instrument(),
            stop_loss_pct="2.5",
            take_profit_pct="150",
            trailing_stop_pct="1",
            max_open_positions="3",
            daily_loss_limit="250.5",
        )
    )
    assert form.is_valid(), form.errors
    request = form.run_request()
    run = queued_run(trader, make_instrument("other", "ETHUSDT"), **request.risk_fields())
    terms = simulated_settings_of(run)
    assert terms.exit_levels == ExitLevels(Decimal("0.025"), Decimal("1.5"), Decimal("0.01"))
    assert terms.limits == AccountLimits(max_open_positions=3, daily_loss_limit=parse_fixed("250.5"))
    blank = BacktestRunForm(form_data(make_instrument("third", "SOLUSDT")))
    assert blank.is_valid(), blank.errors
    assert (
        simulated_settings_of(
            queued_run(trader, make_instrument("fourth", "XRPUSDT"), **blank.run_request().risk_fields())
        ).exit_levels
        == ExitLevels()
    )


def test_the_run_page_shows_the_breakdowns_outcomes_and_risk_events(trader, client) -> None:
    run = finished_walk_run(trader)
    client.force_login(trader)
    page = client.get(f"/backtests/{run.pk}/").content.decode()
    report = run.report
    stops = report["risk_event_counts"]["risk.stop_loss"]
    assert f"risk.stop_loss {stops}" in page and stops > 0
    assert page.count("<td>risk.stop_loss</td>") == stops  # every kept event is a row
    for table in ("per-instrument", "per-exit-reason", "daily", "outcomes", "risk-events"):
        assert f'id="{table}"' in page
    assert f'<td>stop_loss</td><td class="num">{stops}</td>' in page  # the exit-reason row
    for outcome, count in report["outcomes"].items():
        assert f'<td>{outcome}</td><td class="num">{count}</td>' in page
    assert report["daily"] and all(f"<td>{d['day']}</td>" in page for d in report["daily"])
