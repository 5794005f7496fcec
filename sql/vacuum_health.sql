-- What keeps VACUUM from cleaning the jobs table: the table's dead and live row versions
-- (the server's statistics, no scan) and the oldest holders of this database's xmin
-- horizon, oldest first (fragment horizon_holders).
-- Parameters: table (the jobs table's name), limit (holders at most).
-- Returns: one row per holder (one row with NULL holder columns when none): dead rows,
-- live rows, last vacuum (manual or auto), holder kind ('session', 'slot', 'prepared'),
-- its name (pid, slot name, gid), application_name, user, state, xmin age in
-- transactions, seconds held (NULL: unknown), idle in transaction (NULL: not a session
-- or unknown).
-- One round trip: the table's figures join each holder (a LEFT JOIN keeps the row when
-- nothing holds the horizon).
WITH {horizon_holders}
SELECT t.n_dead_tup, t.n_live_tup, t.vacuumed_at,
       h.kind, h.name, h.application_name, h.usename, h.state, h.xmin_age, h.seconds, h.idle
FROM (SELECT 1) AS one
LEFT JOIN (
    SELECT s.n_dead_tup, s.n_live_tup, greatest(s.last_vacuum, s.last_autovacuum) AS vacuumed_at
    FROM pg_stat_user_tables AS s
    WHERE s.relid = to_regclass(%(table)s)
) AS t ON true
LEFT JOIN LATERAL (
    SELECT * FROM holders ORDER BY xmin_age DESC LIMIT %(limit)s
) AS h ON true
