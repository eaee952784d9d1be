"""Chart history: the candles, indicator lines and fills a chart draws when the page opens.

GET /dashboard/charts/<instrument id>/history/?timeframe=1m&bars=500&end=<ms>

- `timeframe`: one of TIMEFRAMES (default 1m); `bars`: how many buckets back from the
  one holding `end` (1..MAX_BARS, default DEFAULT_BARS); `end`: exchange time in Unix
  milliseconds, exclusive (default now). The range is therefore at most MAX_BARS
  buckets: the database aggregates at most that many bars, never the whole tape.
- A parameter that cannot be used is a 400 naming it; an instrument that is not
  charted (its feed off, no trades subscription) is a 404.

Market data is the same for every user; what hangs off accounts is not: fills are only
the caller's accounts', indicator lines only those of the strategies trading on the
caller's accounts (dashboard.selectors' tenancy rule).
"""

from __future__ import annotations

import time
from typing import Any, cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core.fixed_point import fixed_to_str
from dashboard import selectors
from feeds.models import Instrument
from feeds.recording.chart_bars import chart_bars
from processor.models import StrategyOutputRecord

NS_PER_S = 1_000_000_000
TIMEFRAMES: dict[str, int] = {"1s": 1, "5s": 5, "1m": 60, "5m": 300, "15m": 900, "1h": 3600}
DEFAULT_TIMEFRAME = "1m"
DEFAULT_BARS = 500
MAX_BARS = 1000
# Newest first, at most this many of each per answer: a busy account cannot make it unbounded.
MAX_FILLS = 500
MAX_OUTPUTS = 3000
# Output values drawn as indicator lines (ema's fast/slow, volume_breakout's bar high/low);
# open/close/volume would repeat the candles.
INDICATOR_NAMES = ("fast", "slow", "high", "low")
# 2100-01-01: an `end` beyond it is a typo, not a chart.
MAX_END_MS = 4_102_444_800_000


class BadParameter(ValueError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def _int_param(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        return default
    if len(raw) > 20 or not raw.isascii() or not raw.isdigit():
        raise BadParameter(name, f"{name} must be a whole number from {low} to {high}")
    value = int(raw)
    if not low <= value <= high:
        raise BadParameter(name, f"{name} must be a whole number from {low} to {high}")
    return value


def charted_instruments() -> QuerySet[Instrument]:
    """The instruments the dashboard draws a chart for (as the prices panel lists them)."""
    return Instrument.objects.filter(
        feed__enabled=True, subscriptions__enabled=True, subscriptions__channel="trades"
    ).distinct()


@require_GET
@never_cache
def chart_history(request: HttpRequest, instrument_id: int) -> HttpResponse:
    try:
        timeframe = request.GET.get("timeframe") or DEFAULT_TIMEFRAME
        if timeframe not in TIMEFRAMES:
            raise BadParameter("timeframe", f"timeframe must be one of {', '.join(TIMEFRAMES)}")
        bars = _int_param(request, "bars", DEFAULT_BARS, 1, MAX_BARS)
        end_ms = _int_param(request, "end", time.time_ns() // 1_000_000, 1, MAX_END_MS)
    except BadParameter as exc:
        return JsonResponse({exc.name: [str(exc)]}, status=400)
    instrument = charted_instruments().select_related("feed").filter(pk=instrument_id).first()
    if instrument is None:
        return JsonResponse({"detail": "no chart for this instrument"}, status=404)
    bucket_ns = TIMEFRAMES[timeframe] * NS_PER_S
    end_ns = end_ms * 1_000_000
    # The bucket holding `end` and the bars-1 before it; `end` itself stays exclusive.
    start_ns = max(0, (end_ns // bucket_ns - (bars - 1)) * bucket_ns)
    user = cast(User, request.user)  # LoginRequiredMiddleware admits only logged-in users
    return JsonResponse(
        {
            "instrument": {"id": instrument.pk, "feed": instrument.feed.name, "symbol": instrument.symbol},
            "timeframe": timeframe,
            "timeframe_s": TIMEFRAMES[timeframe],
            "start_ms": start_ns // 1_000_000,
            "end_ms": end_ms,
            "bars": [
                {
                    "time": bar.start_ns // NS_PER_S,
                    "open": fixed_to_str(bar.open),
                    "high": fixed_to_str(bar.high),
                    "low": fixed_to_str(bar.low),
                    "close": fixed_to_str(bar.close),
                    "volume": fixed_to_str(bar.volume),
                    "trades": bar.trades,
                }
                for bar in chart_bars(
                    instrument_id=instrument.pk, bucket_ns=bucket_ns, start_ns=start_ns, end_ns=end_ns
                )
            ],
            "outputs": _outputs(user, instrument, start_ns, end_ns),
            "fills": _fills(user, instrument, start_ns, end_ns),
        }
    )


def _outputs(user: selectors.User, instrument: Instrument, start_ns: int, end_ns: int) -> list[dict[str, Any]]:
    """Stored outputs of the caller's strategies on this instrument, oldest first, indicator values only."""
    if not user.is_authenticated:
        return []
    rows = (
        StrategyOutputRecord.objects.filter(
            strategy_id__in=selectors.visible_strategy_ids(user_id=user.pk),
            feed=instrument.feed.name,
            symbol=instrument.venue_symbol,
            occurrence_ns__gte=start_ns,
            occurrence_ns__lt=end_ns,
        )
        .order_by("-occurrence_ns")
        .values_list("strategy_id", "strategy_name", "occurrence_ns", "values")[:MAX_OUTPUTS]
    )
    outputs = []
    for strategy_id, strategy_name, occurrence_ns, values in reversed(rows):
        drawn = {name: values[name] for name in INDICATOR_NAMES if isinstance(values, dict) and name in values}
        if drawn:
            outputs.append(
                {
                    "strategy_id": strategy_id,
                    "strategy": strategy_name,
                    "occurrence_time_ms": occurrence_ns // 1_000_000,
                    "values": drawn,
                }
            )
    return outputs


def _fills(user: selectors.User, instrument: Instrument, start_ns: int, end_ns: int) -> list[dict[str, Any]]:
    """The caller's executions on this instrument, oldest first."""
    fills = (
        selectors.fills_for_user(user)
        .filter(order__instrument_id=instrument.pk, ts_event__gte=start_ns, ts_event__lt=end_ns)
        .select_related("account")
        .order_by("-ts_event", "-id")[:MAX_FILLS]
    )
    return [
        {
            "id": fill.pk,
            "time_ms": fill.ts_event // 1_000_000,
            "side": fill.order.side,
            "intent": fill.order.intent,
            "price": fixed_to_str(fill.price),
            "quantity": fixed_to_str(fill.quantity),
            "account": fill.account.name,
            "client_order_id": fill.order.client_order_id,
        }
        for fill in reversed(fills)
    ]
