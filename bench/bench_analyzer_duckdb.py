"""The benchmark's DuckDB baseline: the same analysis as spanwatch's in SQL (window functions, range join)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from analyzer_levels import DROP_ENTER, DROP_EXIT, GAP_S, PFC_ENTER, PFC_EXIT, QUEUE_ENTER, QUEUE_EXIT

SQL = """
CREATE TEMP TABLE sig AS
WITH raw AS (
    SELECT time::TIMESTAMP AS time, device, metric, interface, queue, priority, direction, link, value, counter
    FROM read_parquet('{archive}/**/*.parquet', hive_partitioning = true)
    WHERE metric IN ('dci_queue_dropped_packets_total', 'dci_pfc_pause_duration_seconds_total',
                     'dci_queue_watermark_bytes', 'dci_interface_oper_up', 'dci_interface_transmit_bytes_total')
), w AS (
    SELECT *,
        lag(time) OVER s AS prev_time, lead(time) OVER s AS next_time,
        lag(counter) OVER s AS prev_counter, lag(value) OVER s AS prev_value
    FROM raw
    WINDOW s AS (PARTITION BY device, interface, queue, priority, direction, link, metric ORDER BY time)
)
SELECT device, interface, queue, priority, direction, link, metric, time, prev_time, next_time,
    CASE WHEN metric LIKE '%_total' AND prev_time IS NOT NULL THEN
        coalesce(CASE WHEN counter >= prev_counter THEN (counter - prev_counter)::DOUBLE ELSE counter::DOUBLE END,
                 CASE WHEN value >= prev_value THEN value - prev_value ELSE value END)
    END AS increase,
    CASE WHEN metric LIKE '%_total' THEN increase / epoch(time - prev_time) ELSE value END AS value
FROM w;

CREATE TEMP TABLE rules(metric VARCHAR, kind VARCHAR, enter DOUBLE, leave DOUBLE, low BOOLEAN, ivl BOOLEAN);
INSERT INTO rules VALUES
    ('dci_queue_dropped_packets_total', 'drops', {drop_enter}, {drop_exit}, false, true),
    ('dci_pfc_pause_duration_seconds_total', 'pfc', {pfc_enter}, {pfc_exit}, false, true),
    ('dci_queue_watermark_bytes', 'queue', {queue_enter}, {queue_exit}, false, true),
    ('dci_interface_oper_up', 'wave_down', 0.5, 0.5, true, false);

CREATE TEMP TABLE events AS
WITH d AS (
    SELECT s.*, r.kind, r.ivl,
        CASE WHEN s.value IS NULL THEN NULL
             WHEN (NOT r.low AND s.value >= r.enter) OR (r.low AND s.value < r.enter) THEN 1
             WHEN (NOT r.low AND s.value < r.leave) OR (r.low AND s.value >= r.leave) THEN 0 END AS decision
    FROM sig s JOIN rules r USING (metric)
), st AS (
    SELECT *, coalesce(last_value(decision IGNORE NULLS) OVER s, 0) = 1 AS on_,
        CASE WHEN ivl THEN coalesce(prev_time, time) ELSE coalesce(prev_time + (time - prev_time) / 2, time) END AS t0,
        CASE WHEN ivl THEN time ELSE coalesce(time + (next_time - time) / 2, time) END AS t1
    FROM d
    WINDOW s AS (PARTITION BY device, interface, queue, priority, direction, link, metric ORDER BY time
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), ch AS (
    SELECT *, sum(CASE WHEN on_ IS DISTINCT FROM prev_on THEN 1 ELSE 0 END) OVER s2 AS run
    FROM (SELECT *, lag(on_) OVER (PARTITION BY device, interface, queue, priority, direction, link, metric
                                   ORDER BY time) AS prev_on FROM st)
    WINDOW s2 AS (PARTITION BY device, interface, queue, priority, direction, link, metric ORDER BY time)
), runs AS (
    SELECT kind, link, device, interface, min(t0) AS start, max(t1) AS "end"
    FROM ch WHERE on_ GROUP BY kind, link, device, interface, queue, priority, direction, metric, run
), b AS (
    SELECT *, max("end") OVER (PARTITION BY kind, link, device, interface ORDER BY start
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
    FROM runs
), blk AS (
    SELECT *, sum(CASE WHEN reach IS NULL OR start > reach + INTERVAL {gap} SECOND THEN 1 ELSE 0 END)
        OVER (PARTITION BY kind, link, device, interface ORDER BY start) AS block
    FROM b
)
SELECT kind, link, device, interface, min(start) AS start, max("end") AS "end"
FROM blk GROUP BY kind, link, device, interface, block;

CREATE TEMP TABLE totals AS
SELECT device, interface, link, metric, sum(increase), max(value), min(value) FROM sig GROUP BY ALL;

CREATE TEMP TABLE steps AS SELECT * REPLACE (start_time::TIMESTAMP AS start_time, end_time::TIMESTAMP AS end_time) FROM read_parquet('{steps}');

CREATE TEMP TABLE pairs AS
SELECT s.step, s.rank, e.kind, e.link,
    greatest(epoch(least(s.end_time, e."end") - greatest(s.start_time, e.start)), 1e-9) AS overlap
FROM steps s JOIN events e ON s.start_time <= e."end" AND s.end_time >= e.start;

WITH touched AS (SELECT DISTINCT step, rank, true AS t FROM pairs),
m AS (SELECT s.*, coalesce(t.t, false) AS touched FROM steps s LEFT JOIN touched t USING (step, rank)),
base AS (SELECT rank, median(duration_seconds) FILTER (WHERE NOT touched) AS baseline FROM m GROUP BY rank),
dev AS (SELECT m.*, b.baseline, abs(duration_seconds - baseline) AS dev FROM m JOIN base b USING (rank)),
mad AS (SELECT rank, median(dev) FILTER (WHERE NOT touched) AS mad FROM dev GROUP BY rank),
inf AS (
    SELECT step, rank,
        greatest(duration_seconds - baseline, 0) > greatest(baseline * 0.05, mad * 1.4826 * 3) AS inflated,
        greatest(duration_seconds - baseline, 0) AS given
    FROM dev JOIN mad USING (rank)
),
w AS (
    SELECT p.*, overlap * CASE kind WHEN 'queue' THEN 0.5 ELSE 1.0 END AS w FROM pairs p
),
sh AS (SELECT *, w / sum(w) OVER (PARTITION BY step, rank) AS share FROM w),
att AS (SELECT sh.step, sh.link, share * given AS attributed FROM sh JOIN inf USING (step, rank)),
ranks AS (SELECT step, count(*) AS ranks FROM steps GROUP BY step)
SELECT (SELECT count(*) FROM events) AS events,
       coalesce(sum(attributed / ranks), 0) AS exposed
FROM att JOIN ranks USING (step);
"""


def analyse(archive: Path, steps_path: Path) -> dict[str, float]:
    con = duckdb.connect()
    con.execute("SET threads = 2")
    statements = SQL.format(
        archive=archive,
        steps=steps_path,
        drop_enter=DROP_ENTER,
        drop_exit=DROP_EXIT,
        pfc_enter=PFC_ENTER,
        pfc_exit=PFC_EXIT,
        queue_enter=QUEUE_ENTER,
        queue_exit=QUEUE_EXIT,
        gap=GAP_S,
    )
    *setup, final = [s for s in statements.split(";") if s.strip()]
    for statement in setup:
        con.execute(statement)
    events, exposed = con.execute(final).fetchone()  # type: ignore[misc]
    return {"events": int(events), "exposed": float(exposed)}
