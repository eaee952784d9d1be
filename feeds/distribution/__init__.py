"""Distribution: the merged feed handed on to whoever consumes it.

The bounded fan-out (one queue per consumer), the conflated dashboard price pushes,
the Redis market-data publisher (`redispub`), and the instrument-metadata gate that
decides which instruments may be streamed and published at all.
"""
