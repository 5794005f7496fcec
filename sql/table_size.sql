-- The planner's idea of the jobs table's size and when it was last analyzed, so the
-- overview counts a small table exactly and estimates a large one. Reads catalogs only.
-- Parameters: none. Returns: estimated rows (-1: never analyzed), last analyze time.
SELECT c.reltuples::bigint, greatest(s.last_analyze, s.last_autoanalyze)
FROM pg_class AS c
LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.oid = to_regclass(%(table)s)
