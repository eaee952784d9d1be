"""Market data published to Redis for other programs: last-value keys with a TTL plus pub/sub.

Modules, one idea each:

- `keys`: the key layout (`{prefix}:{VENUE}:{MARKET_TYPE}:{SYMBOL}:{channel}`).
- `envelope`: the versioned JSON envelope and the event -> channel payload mapping (pure).
- `publisher`: stamps seq/instance/publish time and writes SET PX + PUBLISH pipelined.
- `catalog`: what this process publishes (feeds, instruments, channels, TTLs).
- `gate`: which instruments have metadata; nothing else is published before it.
- `metadata`: fetch, store and publish instrument metadata (startup gate + hourly job).
- `bridge`: the fan-out consumer that turns feed batches into published messages.
- `heartbeat`: per-stream and per-venue health, republished every interval.
- `fallback`: expiry watcher, EXISTS sweep and the REST poller.
- `tap`: sequence tracking for `manage.py tap`.
"""
