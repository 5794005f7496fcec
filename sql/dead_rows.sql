-- The jobs table's dead and live row versions as the server's statistics count them
-- (shared memory, no scan), and whether this session's role may vacuum the table (it
-- owns it, or is a member of its owner; superusers are members of every role).
-- Parameters: table (the jobs table's name). Returns: one row, or none before the
-- table exists (or while it is visible only to another transaction).
SELECT coalesce(s.n_dead_tup, 0), coalesce(s.n_live_tup, 0), pg_has_role(c.relowner, 'USAGE')
FROM pg_class AS c
LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.oid = to_regclass(%(table)s)
