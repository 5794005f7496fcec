-- Fragment {horizon_holders}: the CTE `holders` of what holds back this database's xmin
-- horizon: sessions with a snapshot or a transaction id of their own (of this database,
-- or walsenders, which hold every database; a session's snapshot is never newer than its
-- own transaction, so its xid counts only while it has none), replication slots with an
-- xmin (a physical slot a standby with hot_standby_feedback set, kept after it left),
-- prepared transactions of this database. A slot's catalog_xmin is left out: it holds
-- back the system catalogs, not the queue's tables. Autovacuum workers and this session
-- itself hold nothing a vacuum waits for. Without pg_read_all_stats another role's
-- session shows its pid, user, application_name and xmin, but no state or start (NULL:
-- unknown).
-- Columns: kind ('session', 'slot', 'prepared'), name (pid, slot name, gid),
-- application_name, usename, state, xid (the transaction id held), xmin_age (its age in
-- transactions), seconds held (NULL: unknown), idle in transaction (NULL: not a session
-- or unknown).
holders AS (
    SELECT 'session' AS kind, a.pid::text AS name, a.application_name, a.usename::text,
           a.state, coalesce(a.backend_xmin, a.backend_xid) AS xid,
           age(coalesce(a.backend_xmin, a.backend_xid)) AS xmin_age,
           extract(epoch FROM now() - a.xact_start)::float8 AS seconds,
           a.state IN ('idle in transaction', 'idle in transaction (aborted)') AS idle
    FROM pg_stat_activity AS a
    WHERE coalesce(a.backend_xmin, a.backend_xid) IS NOT NULL
      AND a.pid <> pg_backend_pid()
      AND (a.datname = current_database() OR a.backend_type = 'walsender')
      AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
    UNION ALL
    SELECT 'slot', r.slot_name::text, NULL, NULL,
           CASE WHEN r.active THEN 'active' ELSE 'inactive' END, r.xmin, age(r.xmin),
           NULL, NULL
    FROM pg_replication_slots AS r
    WHERE r.xmin IS NOT NULL
    UNION ALL
    SELECT 'prepared', p.gid, NULL, p.owner::text, 'prepared', p.transaction,
           age(p.transaction), extract(epoch FROM now() - p.prepared)::float8, NULL
    FROM pg_prepared_xacts AS p
    WHERE p.database = current_database()
)
