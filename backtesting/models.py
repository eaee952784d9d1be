"""A backtest run started from the browser or the API: what was asked, how far it got, and its report."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from orders.models.accounts import Reversal
from orders.models.lifecycle import OrderType


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class TradeTerms(models.Model):
    """The trade terms a run or a sweep replays its ticks under: capital, sizes, fees, exit levels, limits."""

    capital = models.DecimalField(max_digits=30, decimal_places=12)
    quantity = models.DecimalField(max_digits=30, decimal_places=12)
    lot_size = models.DecimalField(max_digits=30, decimal_places=12)
    tick_size = models.DecimalField(max_digits=30, decimal_places=12)
    order_type = models.CharField(max_length=10, choices=OrderType.choices, default=OrderType.MARKET)
    reversal = models.CharField(max_length=20, choices=Reversal.choices, default=Reversal.AFTER_EXIT_FILL)
    taker_bps = models.PositiveIntegerField()
    maker_bps = models.PositiveIntegerField()
    latency_ms = models.PositiveIntegerField(default=0)
    # The trade setting's exit levels and the account's limits, as the live models name them.
    stop_loss_pct = models.DecimalField(max_digits=7, decimal_places=4, null=True, blank=True)
    take_profit_pct = models.DecimalField(max_digits=7, decimal_places=4, null=True, blank=True)
    trailing_stop_pct = models.DecimalField(max_digits=7, decimal_places=4, null=True, blank=True)
    max_open_positions = models.PositiveIntegerField(null=True, blank=True)
    daily_loss_limit = models.DecimalField(max_digits=30, decimal_places=12, null=True, blank=True)

    class Meta:
        abstract = True


class ReplayJob(TradeTerms):
    """What a run and a sweep have alike: the replayed range, the trade terms, the job's status and times."""

    start_ns = models.BigIntegerField()
    end_ns = models.BigIntegerField()
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.QUEUED)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Renewed by the process running the job; a running job whose heartbeat stopped (its
    # process was killed or lost) is failed by the stalled-jobs job, never left running.
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class BacktestRun(ReplayJob):
    """One backtest of one strategy kind over recorded ticks; only the run's task writes its progress and result.

    Money and quantities are stored as the exact decimals the user typed; the report
    is the JSON of processor.backtest_report.report_as_json (money as exact strings).
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="backtest_runs")
    kind = models.CharField(max_length=60)
    params = models.JSONField(default=dict, blank=True)
    feed = models.CharField(max_length=50)
    symbols = models.JSONField(default=list, help_text="Symbols of the replayed instruments on the feed.")
    ticks_done = models.BigIntegerField(default=0)
    ticks_total = models.BigIntegerField(default=0)
    signals = models.PositiveIntegerField(default=0)
    report = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=("owner", "-created_at"), name="backtest_run_owner_recent")]

    def __str__(self) -> str:
        return f"backtest {self.pk} {self.kind} on {self.feed} ({self.status})"

    @property
    def progress(self) -> float:
        """The share of ticks replayed, from 0.0 to 1.0 (1.0 once done)."""
        if self.status == RunStatus.DONE:
            return 1.0
        return min(self.ticks_done / self.ticks_total, 1.0) if self.ticks_total else 0.0


class BacktestSweep(ReplayJob):
    """A parameter grid over recorded ticks: one backtest with fills per point, best first by `metric`.

    With `trials` set, `grid` is the optimizer's search space instead (lists are choices,
    {low, high} objects ranges) and `trials` points proposed by the sampler are run.
    Trade terms as on a run. `results` is the list of points in the chosen metric's
    order (backtesting.sweep.ranked), each {index, params, refused, figures} with money
    as exact strings; only the sweep's task writes progress and results.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="backtest_sweeps")
    kind = models.CharField(max_length=60)
    params = models.JSONField(default=dict, blank=True, help_text="The parameters the grid does not vary.")
    grid = models.JSONField(
        help_text="Parameter name -> list of values; with trials, the search space (lists or {low, high} ranges)."
    )
    trials = models.PositiveIntegerField(
        null=True, blank=True, help_text="Points the optimizer proposes over the search space; empty: every grid point."
    )
    seed = models.PositiveIntegerField(default=0, help_text="The optimizer's seed.")
    metric = models.CharField(max_length=20, default="pnl")
    workers = models.PositiveSmallIntegerField(default=2)
    feed = models.CharField(max_length=50)
    symbols = models.JSONField(default=list)
    points_done = models.PositiveIntegerField(default=0)
    points_total = models.PositiveIntegerField(default=0)
    ticks = models.BigIntegerField(default=0)
    results = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=("owner", "-created_at"), name="backtest_sweep_owner_recent")]

    def __str__(self) -> str:
        return f"sweep {self.pk} {self.kind} on {self.feed} ({self.status})"

    @property
    def progress(self) -> float:
        """The share of points backtested, from 0.0 to 1.0 (1.0 once done)."""
        if self.status == RunStatus.DONE:
            return 1.0
        return min(self.points_done / self.points_total, 1.0) if self.points_total else 0.0
