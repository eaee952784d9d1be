"""Prometheus metrics of the feed path: streams, the recorder, the fan-out."""

from prometheus_client import Counter, Gauge

TICKS_RECEIVED = Counter("feed_ticks_received_total", "Market events parsed from frames", ["venue", "feed"])
FRAMES_MALFORMED = Counter(
    "feed_frames_malformed_total", "Frames skipped because they could not be parsed", ["venue", "reason"]
)
CONSUMER_OVERFLOW = Counter(
    "feed_consumer_overflow_total", "Feed batches a consumer's full queue could not take", ["consumer"]
)
RECOVERY_ROWS_REFUSED = Counter(
    "feed_recovery_rows_refused_total",
    "Rows of a REST gap-recovery page that were not valid trades (the rest of the page was recovered)",
    ["venue", "reason"],
)
CONSUMER_SHEDDING = Gauge(
    "feed_consumer_shedding",
    "1 while a consumer's full queue is shedding feed batches, 0 once it keeps up again",
    ["consumer"],
    multiprocess_mode="livemax",
)
CONSUMER_QUEUE_DEPTH = Gauge("feed_consumer_queue_depth", "Batches waiting in a consumer's queue", ["consumer"])


STREAM_CONNECTS = Counter("feed_stream_connects_total", "Successful (re)connects of a supervised stream", ["feed"])
STREAM_CONNECT_FAILURES = Counter(
    "feed_stream_connect_failures_total", "Failed connect attempts of a supervised stream", ["feed"]
)
STREAM_RECOVERED = Counter("feed_stream_recovered_trades_total", "Trades recovered over REST after a gap", ["feed"])
STREAM_KNOWN_HOLES = Counter("feed_stream_known_holes_total", "Gaps recorded as known holes", ["feed"])
RECORDER_WRITTEN = Counter("recorder_ticks_written_total", "Ticks committed to the database")
RECORDER_OVERFLOW = Counter("recorder_ticks_dropped_total", "Ticks dropped because the recorder buffer was full")
RECORDER_WRITE_FAILURES = Counter("recorder_write_failures_total", "Failed batch writes (rows kept, retried)")
RECORDER_DUPLICATES = Counter(
    "recorder_ticks_duplicate_total", "Ticks skipped as already recorded (the same instrument and trade id)"
)
RECORDER_REFUSED = Counter(
    "recorder_ticks_refused_total", "Ticks the database refused (the rest of their batch was written)", ["reason"]
)
