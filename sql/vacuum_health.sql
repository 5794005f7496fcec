-- What keeps VACUUM from cleaning the jobs table: the table's dead and live row versions
-- (the server's statistics, no scan) and the oldest holders of this database's xmin
-- horizon, oldest first: sessions with a snapshot (of this database, or walsenders, which
-- hold every database), replication slots with an xmin (a physical slot a standby with
-- hot_standby_feedback set, kept after it left), prepared transactions of this database.
-- A slot's catalog_xmin is left out: it holds back the system catalogs, not the queue's
-- tables. Autovacuum workers and this session itself hold nothing a vacuum waits for.
-- Without pg_read_all_stats another role's session shows its pid, user, application_name
-- and xmin, but no state or start (NULL: unknown).
-- Parameters: table (the jobs table's name), limit (holders at most).
-- Returns: one row per holder (one row with NULL holder columns when none): dead rows,
-- live rows, last vacuum (manual or auto), holder kind ('session', 'slot', 'prepared'),
-- its name (pid, slot name, gid), application_name, user, state, xmin age in
-- transactions, seconds held (NULL: unknown), idle in transaction (NULL: not a session
-- or unknown).
-- One round trip: the table's figures join each holder (a LEFT JOIN keeps the row when
-- nothing holds the horizon).
WITH holders AS (
    SELECT 'session' AS kind, a.pid::text AS name, a.application_name, a.usename::text,
           a.state, age(a.backend_xmin) AS xmin_age,
           extract(epoch FROM now() - a.xact_start)::float8 AS seconds,
           CASE WHEN a.state IS NOT NULL THEN a.state LIKE 'idle in transaction%%' END AS idle
    FROM pg_stat_activity AS a
    WHERE a.backend_xmin IS NOT NULL
      AND a.pid <> pg_backend_pid()
      AND (a.datname = current_database() OR a.backend_type = 'walsender')
      AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
    UNION ALL
    SELECT 'slot', r.slot_name::text, NULL, NULL,
           CASE WHEN r.active THEN 'active' ELSE 'inactive' END, age(r.xmin), NULL, NULL
    FROM pg_replication_slots AS r
    WHERE r.xmin IS NOT NULL
    UNION ALL
    SELECT 'prepared', p.gid, NULL, p.owner::text, 'prepared', age(p.transaction),
           extract(epoch FROM now() - p.prepared)::float8, NULL
    FROM pg_prepared_xacts AS p
    WHERE p.database = current_database()
)
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
