-- Runs finished per kind and minute bucket over the last %(minutes)s minutes, from the
-- journal: completed and failed (retried or dead). The journal has no time index (every
-- settlement would write one); its ids grow with recorded_at, so a binary search over the
-- primary key finds the first entry of the window in a few dozen index probes, and only
-- the window's entries are read. Entries of a transaction that began before the window
-- but committed after may fall just outside it.
-- Parameters: minutes, bucket (minutes per bucket). Returns: kind, bucket start,
-- completed, failed, the database time.
WITH RECURSIVE window_start AS (
    SELECT now() - make_interval(mins => %(minutes)s) AS at
),
search AS (
    SELECT (SELECT min(id) FROM {journal}) AS lo,
           (SELECT max(id) FROM {journal}) + 1 AS hi
    UNION ALL
    SELECT CASE WHEN probe.recorded_at IS NULL OR probe.recorded_at < w.at
                THEN s.mid + 1 ELSE s.lo END,
           CASE WHEN probe.recorded_at IS NULL OR probe.recorded_at < w.at
                THEN s.hi ELSE s.mid END
    FROM (SELECT lo, hi, lo + (hi - lo) / 2 AS mid FROM search WHERE lo < hi) AS s
    CROSS JOIN window_start AS w
    LEFT JOIN LATERAL (
        SELECT j.recorded_at FROM {journal} AS j
        WHERE j.id >= s.mid ORDER BY j.id LIMIT 1
    ) AS probe ON true
),
first_id AS (
    SELECT max(lo) AS id FROM search  -- lo only grows: its last value
)
SELECT j.kind,
       date_bin(make_interval(mins => %(bucket)s), j.recorded_at, w.at) AS bucket,
       count(*) FILTER (WHERE j.outcome = 'completed'),
       count(*) FILTER (WHERE j.outcome IN ('retried', 'dead')),
       now()
FROM {journal} AS j
CROSS JOIN window_start AS w
WHERE j.id >= (SELECT id FROM first_id) AND j.recorded_at >= w.at
  AND j.outcome IN ('completed', 'retried', 'dead')
GROUP BY j.kind, bucket
ORDER BY j.kind, bucket
