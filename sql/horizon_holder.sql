-- The oldest transaction id seen holding back this database's xmin horizon, as text: a
-- session's snapshot or its own transaction (of this database, or a walsender, which
-- holds every database), a replication slot's xmin, a prepared transaction of this
-- database. NULL when none is seen (this session and autovacuum's hold nothing a vacuum
-- waits for). While it stays the same, a vacuum can remove no row version that died
-- after the last vacuum began (`venturi.worker.vacuuming`).
-- Parameters: none. Returns: one row.
SELECT (
    SELECT h.xid::text
    FROM (
        SELECT a.backend_xmin AS xid FROM pg_stat_activity AS a
        WHERE a.backend_xmin IS NOT NULL
          AND a.pid <> pg_backend_pid()
          AND (a.datname = current_database() OR a.backend_type = 'walsender')
          AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
        UNION ALL
        SELECT a.backend_xid FROM pg_stat_activity AS a
        WHERE a.backend_xid IS NOT NULL
          AND a.pid <> pg_backend_pid()
          AND a.datname = current_database()
          AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
        UNION ALL
        SELECT r.xmin FROM pg_replication_slots AS r WHERE r.xmin IS NOT NULL
        UNION ALL
        SELECT p.transaction FROM pg_prepared_xacts AS p
        WHERE p.database = current_database()
    ) AS h
    ORDER BY age(h.xid) DESC
    LIMIT 1
)
