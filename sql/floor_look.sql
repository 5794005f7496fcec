-- What decides whether claims start from floors (`venturi.store.floors.FloorSwitch`): the
-- jobs table's dead row versions as the server's statistics count them (no scan), and
-- the age in transactions of the oldest holder of this database's xmin horizon (fragment
-- horizon_holders; NULL when none is seen).
-- Parameters: table (the jobs table's name). Returns: one row, or none before the table
-- exists (or while it is visible only to another transaction).
WITH {horizon_holders}
SELECT coalesce(s.n_dead_tup, 0), (SELECT max(holders.xmin_age) FROM holders)
FROM pg_class AS c
LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.oid = to_regclass(%(table)s)
