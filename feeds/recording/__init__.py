"""Recording: recorded ticks in the database, written and read back.

The tick recorder (a fan-out consumer) batches ticks and checkpoints to a writer
(binary COPY in a writer process on PostgreSQL, bulk_create elsewhere); rows the
database refuses are set aside with a reason. The read side (`tick_selectors`,
`tick_history`) serves exports, backtests, backfill and the replay venue.
"""
