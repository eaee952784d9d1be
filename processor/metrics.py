"""Prometheus metrics the processor updates itself (the rest are sampled in tradingsite.metrics)."""

from prometheus_client import Gauge

SIGNAL_QUEUE_DEPTH = Gauge(
    "processor_signal_queue_depth",
    "Signals a subscriber (the trade executor) has not taken yet",
    ["subscriber"],
    multiprocess_mode="livesum",
)
