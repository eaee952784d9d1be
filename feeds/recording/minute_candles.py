"""The per-minute candle rollup of recorded ticks (feeds.models.MinuteCandle), kept by the database.

Triggers on the tick table keep it in the statement that writes the ticks, whichever
writer that is (the writer process's binary COPY, the staging table's INSERT ... ON
CONFLICT DO NOTHING, bulk_create on SQLite): one INSERT ... ON CONFLICT DO UPDATE per
statement (PostgreSQL: a statement trigger over the rows actually inserted, so a tick
skipped as already recorded is never counted) or per row (SQLite). The upsert keeps
low/high, adds volume and trade count, and replaces open (close) only when the new
tick sorts before (after) the kept one by (ts_event, trade id in numeric order, id):
ticks may arrive out of order, and the candle still equals the raw aggregation.

Ticks are append-only; a deleted tick has its minute recomputed from the ticks left
(delete trigger), TRUNCATE empties the rollup. `recompute_minutes` rebuilds a range
from the ticks (the backfill migration and the `backfill_candles` command).
"""

from __future__ import annotations

from django.db import DatabaseError, connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

NS_PER_MINUTE = 60_000_000_000
TABLE = "feeds_minutecandle"
TICKS = "feeds_tick"
_COLUMNS = (
    "instrument_id, minute, open, high, low, close, volume, trades, "
    "open_ts, open_trade_id, open_tick_id, close_ts, close_trade_id, close_tick_id"
)


def _upsert_clause(vendor: str) -> str:
    """ON CONFLICT merging one new partial candle (`excluded`) into the kept one."""
    greatest, least = ("GREATEST", "LEAST") if vendor == "postgresql" else ("max", "min")
    kept = TABLE

    def key(row: str, side: str) -> str:
        return f"({row}.{side}_ts, length({row}.{side}_trade_id), {row}.{side}_trade_id, {row}.{side}_tick_id)"

    def replace(side: str, compare: str, fields: tuple[str, ...]) -> list[str]:
        earlier = f"{key('excluded', side)} {compare} {key(kept, side)}"
        return [f"{field} = CASE WHEN {earlier} THEN excluded.{field} ELSE {kept}.{field} END" for field in fields]

    updates = [
        f"high = {greatest}({kept}.high, excluded.high)",
        f"low = {least}({kept}.low, excluded.low)",
        f"volume = {kept}.volume + excluded.volume",
        f"trades = {kept}.trades + excluded.trades",
        *replace("open", "<", ("open", "open_ts", "open_trade_id", "open_tick_id")),
        *replace("close", ">", ("close", "close_ts", "close_trade_id", "close_tick_id")),
    ]
    return "ON CONFLICT (instrument_id, minute) DO UPDATE SET " + ", ".join(updates)


def _postgres_roll_sql() -> str:
    """The statement trigger's upsert of the rows one statement inserted (transition table new_ticks).

    One hash aggregate over the batch finds each minute's figures and its first and last
    exchange time; open and close are then the rows at those times (a hash join that
    yields the ties only), ordered among themselves by trade id and tick id. Sorting the
    whole batch by the full key, twice, cost several times more per recorded tick.
    """
    order = "length(t.trade_id) {d}, t.trade_id {d}, t.id {d}"

    def edge(bound: str, direction: str) -> str:
        return (
            f"SELECT DISTINCT ON (g.instrument_id, g.minute) g.instrument_id, g.minute, t.price, t.ts_event, "
            f"t.trade_id, t.id FROM g JOIN new_ticks t ON t.instrument_id = g.instrument_id AND t.ts_event = g.{bound} "
            f"ORDER BY g.instrument_id, g.minute, {order.format(d=direction)}"
        )

    return f"""
WITH g AS (SELECT instrument_id, ts_event / {NS_PER_MINUTE} AS minute, max(price) AS high, min(price) AS low,
                  sum(volume) AS volume, count(*) AS trades, min(ts_event) AS first_ts, max(ts_event) AS last_ts
           FROM new_ticks GROUP BY 1, 2)
INSERT INTO {TABLE} ({_COLUMNS})
SELECT g.instrument_id, g.minute, f.price, g.high, g.low, l.price, g.volume, g.trades,
       f.ts_event, f.trade_id, f.id, l.ts_event, l.trade_id, l.id
FROM g
JOIN ({edge("first_ts", "ASC")}) f USING (instrument_id, minute)
JOIN ({edge("last_ts", "DESC")}) l USING (instrument_id, minute)
ORDER BY g.instrument_id, g.minute
{_upsert_clause("postgresql")}"""


def _recompute_select(where: str, *, volume_sum: str = "sum") -> str:
    """Candles of the ticks matching `where` (over alias t), open and close by index probes."""

    def probe(direction: str, bound: str) -> str:
        return (
            f"(SELECT p.id FROM {TICKS} p WHERE p.instrument_id = g.instrument_id AND p.ts_event = g.{bound} "
            f"ORDER BY length(p.trade_id) {direction}, p.trade_id {direction}, p.id {direction} LIMIT 1)"
        )

    return f"""
SELECT g.instrument_id, g.minute, o.price, g.high, g.low, c.price, g.volume, g.trades,
       o.ts_event, o.trade_id, o.id, c.ts_event, c.trade_id, c.id
FROM (SELECT t.instrument_id, t.ts_event / {NS_PER_MINUTE} AS minute, max(t.price) AS high, min(t.price) AS low,
             {volume_sum}(t.volume) AS volume, count(*) AS trades, min(t.ts_event) AS first_ts,
             max(t.ts_event) AS last_ts
      FROM {where} GROUP BY t.instrument_id, t.ts_event / {NS_PER_MINUTE}) g
JOIN {TICKS} o ON o.id = {probe("ASC", "first_ts")}
JOIN {TICKS} c ON c.id = {probe("DESC", "last_ts")}"""


def _postgres_ddl() -> list[str]:
    changed = f"SELECT DISTINCT instrument_id, ts_event / {NS_PER_MINUTE} AS minute FROM old_ticks"
    recompute = _recompute_select(
        f"({changed}) d JOIN {TICKS} t ON t.instrument_id = d.instrument_id "
        f"AND t.ts_event >= d.minute * {NS_PER_MINUTE} AND t.ts_event < (d.minute + 1) * {NS_PER_MINUTE}"
    )
    return [
        f"""CREATE OR REPLACE FUNCTION feeds_tick_roll_minute_candles() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
{_postgres_roll_sql()};
RETURN NULL;
END $$""",
        f"""CREATE OR REPLACE FUNCTION feeds_tick_recompute_minute_candles() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
DELETE FROM {TABLE} m USING ({changed}) d WHERE m.instrument_id = d.instrument_id AND m.minute = d.minute;
INSERT INTO {TABLE} ({_COLUMNS}) {recompute};
RETURN NULL;
END $$""",
        f"""CREATE OR REPLACE FUNCTION feeds_tick_empty_minute_candles() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
DELETE FROM {TABLE};
RETURN NULL;
END $$""",
        f"""CREATE TRIGGER feeds_tick_minute_candles_insert AFTER INSERT ON {TICKS}
REFERENCING NEW TABLE AS new_ticks FOR EACH STATEMENT EXECUTE FUNCTION feeds_tick_roll_minute_candles()""",
        f"""CREATE TRIGGER feeds_tick_minute_candles_delete AFTER DELETE ON {TICKS}
REFERENCING OLD TABLE AS old_ticks FOR EACH STATEMENT EXECUTE FUNCTION feeds_tick_recompute_minute_candles()""",
        f"""CREATE TRIGGER feeds_tick_minute_candles_truncate AFTER TRUNCATE ON {TICKS}
FOR EACH STATEMENT EXECUTE FUNCTION feeds_tick_empty_minute_candles()""",
    ]


def _sqlite_ddl() -> list[str]:
    minute = f"OLD.ts_event / {NS_PER_MINUTE}"
    recompute = _recompute_select(
        f"{TICKS} t WHERE t.instrument_id = OLD.instrument_id "
        f"AND t.ts_event >= {minute} * {NS_PER_MINUTE} AND t.ts_event < ({minute} + 1) * {NS_PER_MINUTE}",
    )
    return [
        f"""CREATE TRIGGER feeds_tick_minute_candles_insert AFTER INSERT ON {TICKS} FOR EACH ROW BEGIN
INSERT INTO {TABLE} ({_COLUMNS}) VALUES (NEW.instrument_id, NEW.ts_event / {NS_PER_MINUTE}, NEW.price, NEW.price,
NEW.price, NEW.price, NEW.volume, 1, NEW.ts_event, NEW.trade_id, NEW.id, NEW.ts_event, NEW.trade_id, NEW.id)
{_upsert_clause("sqlite")};
END""",
        f"""CREATE TRIGGER feeds_tick_minute_candles_delete AFTER DELETE ON {TICKS} FOR EACH ROW BEGIN
DELETE FROM {TABLE} WHERE instrument_id = OLD.instrument_id AND minute = {minute};
INSERT INTO {TABLE} ({_COLUMNS}) {recompute};
END""",
    ]


_DROP_POSTGRES = [
    f"DROP TRIGGER IF EXISTS feeds_tick_minute_candles_insert ON {TICKS}",
    f"DROP TRIGGER IF EXISTS feeds_tick_minute_candles_delete ON {TICKS}",
    f"DROP TRIGGER IF EXISTS feeds_tick_minute_candles_truncate ON {TICKS}",
    "DROP FUNCTION IF EXISTS feeds_tick_roll_minute_candles()",
    "DROP FUNCTION IF EXISTS feeds_tick_recompute_minute_candles()",
    "DROP FUNCTION IF EXISTS feeds_tick_empty_minute_candles()",
]
_DROP_SQLITE = [
    "DROP TRIGGER IF EXISTS feeds_tick_minute_candles_insert",
    "DROP TRIGGER IF EXISTS feeds_tick_minute_candles_delete",
]


def install_triggers(db: BaseDatabaseWrapper) -> None:
    """Create the rollup's triggers on `db` (PostgreSQL or SQLite)."""
    with db.cursor() as cursor:
        for statement in _postgres_ddl() if db.vendor == "postgresql" else _sqlite_ddl():
            cursor.execute(statement)


def replace_functions(db: BaseDatabaseWrapper) -> None:
    """Bring the triggers' functions on `db` up to this module's statements (PostgreSQL; SQLite's are inline)."""
    if db.vendor != "postgresql":
        return
    with db.cursor() as cursor:
        for statement in _postgres_ddl():
            if statement.startswith("CREATE OR REPLACE FUNCTION"):
                cursor.execute(statement)


def drop_triggers(db: BaseDatabaseWrapper) -> None:
    """Remove the rollup's triggers from `db`."""
    with db.cursor() as cursor:
        for statement in _DROP_POSTGRES if db.vendor == "postgresql" else _DROP_SQLITE:
            cursor.execute(statement)


def recompute_minutes(*, instrument_id: int, start_ns: int, end_ns: int, db: BaseDatabaseWrapper = connection) -> int:
    """Rebuild the candles of the minutes touching [start_ns, end_ns) from the ticks; return how many.

    The tick table is locked against writers (SHARE on PostgreSQL) while it runs, so a
    batch recorded meanwhile is neither missed nor counted twice.
    """
    first_minute = start_ns // NS_PER_MINUTE
    end_minute = -(-end_ns // NS_PER_MINUTE)
    params = {
        "instrument": instrument_id,
        "m0": first_minute,
        "m1": end_minute,
        "t0": first_minute * NS_PER_MINUTE,
        "t1": end_minute * NS_PER_MINUTE,
    }
    where = f"{TICKS} t WHERE t.instrument_id = %(instrument)s AND t.ts_event >= %(t0)s AND t.ts_event < %(t1)s"

    def run(volume_sum: str) -> int:
        with transaction.atomic(using=db.alias), db.cursor() as cursor:
            if db.vendor == "postgresql":
                cursor.execute(f"LOCK TABLE {TICKS} IN SHARE MODE")
                cursor.execute("SET LOCAL jit = off")
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE instrument_id = %(instrument)s AND minute >= %(m0)s AND minute < %(m1)s",
                params,
            )
            cursor.execute(
                f"INSERT INTO {TABLE} ({_COLUMNS}) {_recompute_select(where, volume_sum=volume_sum)}", params
            )
            return max(cursor.rowcount, 0)

    try:
        return run("sum")
    except DatabaseError:
        if db.vendor != "sqlite":
            raise
        # SQLite's exact SUM raises beyond int64; the float total is what the live trigger keeps then.
        return run("total")
