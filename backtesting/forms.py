"""The form that starts a backtest run over recorded ticks; every bad value is a form error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from backtesting.services import RISK_FIELDS, RunRequest
from backtesting.sweep import METRICS, SweepError, grid_points
from backtesting.sweep_optimize import search_space
from backtesting.sweep_services import MAX_WORKERS, SweepRequest
from core.admin_scope import BoundedModelMultipleChoiceField
from core.json_limits import BoundedJSONField
from feeds.models import Instrument
from orders.brokers.paper import PaperFees
from orders.models.accounts import Reversal
from orders.models.lifecycle import OrderType
from processor.strategies import clean_params, kind_choices

MAX_RANGE = timedelta(days=31)
MAX_INSTRUMENTS = 20
_FEES = PaperFees()
_MONEY = {"max_digits": 30, "decimal_places": 12, "min_value": Decimal("0.000000000001")}
# As the trade setting's exit level fields.
_PERCENT: dict[str, Any] = {
    "max_digits": 7,
    "decimal_places": 4,
    "min_value": Decimal("0.0001"),
    "max_value": Decimal("99.9999"),
}


def _ns(moment: datetime) -> int:
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def _local_minute(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M")


def run_form_initial(run: Any) -> dict[str, Any]:
    """The run form's values for starting `run` again: its strategy, instruments, range and terms.

    The range is shown to the minute, as the form takes it.
    """
    instruments = Instrument.objects.filter(feed__name=run.feed, symbol__in=run.symbols)
    return {
        "kind": run.kind,
        "params": run.params,
        "instruments": [instrument.pk for instrument in instruments],
        "start": _local_minute(run.start_ns),
        "end": _local_minute(run.end_ns),
        "capital": run.capital,
        "quantity": run.quantity,
        "order_type": run.order_type,
        "reversal": run.reversal,
        "taker_bps": run.taker_bps,
        "maker_bps": run.maker_bps,
        "latency_ms": run.latency_ms,
        **{name: getattr(run, name) for name in RISK_FIELDS},
    }


class InstrumentChoiceField(BoundedModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.feed.name} / {obj.symbol}"


class BacktestRunForm(forms.Form):
    kind = forms.ChoiceField(label="Strategy kind", choices=kind_choices)
    params = BoundedJSONField(
        label="Parameters (JSON)", help_text='e.g. {"timeframe_s": 60, "fast": 12, "slow": 26}; blank for defaults'
    )
    instruments = InstrumentChoiceField(
        queryset=Instrument.objects.select_related("feed").order_by("feed__name", "symbol"),
        help_text="Recorded instruments of one feed",
    )
    start = forms.DateTimeField(label="From (UTC)", widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    end = forms.DateTimeField(label="To (UTC)", widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    capital = forms.DecimalField(initial=Decimal("10000"), **_MONEY)  # type: ignore[arg-type]
    quantity = forms.DecimalField(initial=Decimal("0.01"), help_text="Quantity of each entry", **_MONEY)  # type: ignore[arg-type]
    order_type = forms.ChoiceField(choices=OrderType.choices, initial=OrderType.MARKET)
    reversal = forms.ChoiceField(choices=Reversal.choices, initial=Reversal.AFTER_EXIT_FILL)
    taker_bps = forms.IntegerField(label="Taker fee (bps)", min_value=0, max_value=10_000, initial=_FEES.taker_bps)
    maker_bps = forms.IntegerField(label="Maker fee (bps)", min_value=0, max_value=10_000, initial=_FEES.maker_bps)
    latency_ms = forms.IntegerField(label="Latency (ms)", min_value=0, max_value=3_600_000, initial=0)
    stop_loss_pct = forms.DecimalField(
        label="Stop-loss (%)",
        required=False,
        help_text="Close when the price moves this many percent against the entry",
        **_PERCENT,
    )
    take_profit_pct = forms.DecimalField(
        label="Take-profit (%)",
        required=False,
        help_text="Close when it moves this many percent in favour",
        **(_PERCENT | {"max_value": Decimal("999.9999")}),
    )
    trailing_stop_pct = forms.DecimalField(
        label="Trailing stop (%)",
        required=False,
        help_text="Close when it falls back this many percent from its best",
        **_PERCENT,
    )
    max_open_positions = forms.IntegerField(
        label="Max open positions", required=False, min_value=1, help_text="Entries refused while this many are open"
    )
    daily_loss_limit = forms.DecimalField(
        label="Daily loss limit",
        required=False,
        help_text="Entries halted for the rest of the UTC day once realized P&L reaches minus this",
        **_MONEY,  # type: ignore[arg-type]
    )

    def clean_instruments(self) -> list[Instrument]:
        chosen = list(self.cleaned_data["instruments"])
        if len(chosen) > MAX_INSTRUMENTS:
            raise ValidationError(f"Choose at most {MAX_INSTRUMENTS} instruments.")
        if len({instrument.feed_id for instrument in chosen}) > 1:
            raise ValidationError("Choose instruments of one feed.")
        return chosen

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        kind, params = cleaned.get("kind"), cleaned.get("params")
        if kind and params is not None:
            try:
                cleaned["params"] = clean_params(kind, params)
            except ValidationError as exc:
                self.add_error("params", exc.messages)
        start, end = cleaned.get("start"), cleaned.get("end")
        if start and end:
            if end <= start:
                self.add_error("end", "The range must end after it starts.")
            elif end - start > MAX_RANGE:
                self.add_error("end", f"At most {MAX_RANGE.days} days in one run.")
        return cleaned

    def run_request(self) -> RunRequest:
        """The validated request; call after is_valid()."""
        data = self.cleaned_data
        instruments: list[Instrument] = data["instruments"]
        first = instruments[0]
        return RunRequest(
            kind=data["kind"],
            params=data["params"],
            feed=first.feed.name,
            symbols=[instrument.symbol for instrument in instruments],
            start_ns=_ns(data["start"]),
            end_ns=_ns(data["end"]),
            capital=data["capital"],
            quantity=data["quantity"],
            # The replayed instrument's own steps, as the live executor rounds with them.
            lot_size=first.lot_size,
            tick_size=first.tick_size,
            order_type=data["order_type"],
            reversal=data["reversal"],
            taker_bps=data["taker_bps"],
            maker_bps=data["maker_bps"],
            latency_ms=data["latency_ms"],
            **{name: data.get(name) for name in RISK_FIELDS},
        )


MAX_SWEEP_POINTS = 256


class BacktestSweepForm(BacktestRunForm):
    """A sweep: the run's form (its parameters are the ones the grid does not vary), a grid and a metric."""

    grid = BoundedJSONField(
        label="Grid or search space (JSON)",
        help_text='Parameter name -> list of values, e.g. {"fast": [5, 8], "slow": [20, 30]}; with optimizer '
        'trials, also ranges, e.g. {"fast": {"low": 2, "high": 20}}',
    )
    trials = forms.IntegerField(
        label="Optimizer trials",
        required=False,
        min_value=1,
        max_value=MAX_SWEEP_POINTS,
        help_text="Empty: every grid point. A number: Optuna's TPE sampler proposes that many points, steered by the sort figure",
    )
    seed = forms.IntegerField(label="Optimizer seed", required=False, min_value=0, max_value=2**31 - 1, initial=0)
    metric = forms.ChoiceField(label="Sort by", choices=[(name, name) for name in METRICS], initial="pnl")
    workers = forms.IntegerField(label="Processes", min_value=1, max_value=MAX_WORKERS, initial=2)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["params"].label = "Fixed parameters (JSON)"
        self.fields["params"].help_text = "The parameters the grid does not vary; {} for the kind's defaults"

    def clean(self) -> dict[str, Any]:
        # The fixed parameters alone need not be valid (the grid completes them): each
        # point is validated when it runs, and a refused one is listed with its reason.
        cleaned = forms.Form.clean(self) or {}
        params = cleaned.get("params")
        start, end = cleaned.get("start"), cleaned.get("end")
        if start and end:
            if end <= start:
                self.add_error("end", "The range must end after it starts.")
            elif end - start > MAX_RANGE:
                self.add_error("end", f"At most {MAX_RANGE.days} days in one sweep.")
        grid = cleaned.get("grid")
        if grid is None and "grid" not in self.errors:
            self.add_error("grid", "Give the grid: parameter name -> list of values.")
        elif grid is not None and cleaned.get("trials"):
            try:
                search_space(grid)
            except SweepError as exc:
                self.add_error("grid", str(exc))
        elif grid is not None and "trials" not in self.errors:
            try:
                count = len(grid_points(params if isinstance(params, dict) else {}, grid))
            except SweepError as exc:
                self.add_error("grid", str(exc))
            else:
                if count > MAX_SWEEP_POINTS:
                    self.add_error("grid", f"The grid has {count} points; at most {MAX_SWEEP_POINTS} from the browser.")
        return cleaned

    def sweep_request(self) -> SweepRequest:
        """The validated sweep; call after is_valid()."""
        data = self.cleaned_data
        return SweepRequest(
            run=self.run_request(),
            grid=data["grid"],
            metric=data["metric"],
            workers=data["workers"],
            trials=data.get("trials") or None,
            seed=data.get("seed") or 0,
        )
