"""Prometheus metrics of the feed path."""
from prometheus_client import Counter, Gauge

TICKS_RECEIVED = Counter("feed_ticks_received_total", "Market events parsed from frames", ["venue", "feed"])
FRAMES_MALFORMED = Counter(
    "feed_frames_malformed_total", "Frames skipped because they could not be parsed", ["venue", "reason"]
)
CONSUMER_OVERFLOW = Counter(
    "feed_consumer_overflow_total", "Feed batches a consumer's full queue could not take", ["consumer"]
)
CONSUMER_QUEUE_DEPTH = Gauge("feed_consumer_queue_depth", "Batches waiting in a consumer's queue", ["consumer"])
