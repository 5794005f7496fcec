-- Inserts a job with a dedup key only if no pending job holds the key (merge-function path).
-- Parameters: id, kind, payload, priority, delay | at, max_attempts, dedup_key.
-- Returns: id when inserted, no row when the key is held.
WITH inserted AS (
    INSERT INTO {jobs} (id, kind, payload, priority, visible_at, max_attempts, dedup_key)
    VALUES (
        %(id)s, %(kind)s, %(payload)s::jsonb, %(priority)s,
        coalesce(%(at)s::timestamptz,
                 now() + make_interval(secs => coalesce(%(delay)s::float8, 0))),
        %(max_attempts)s, %(dedup_key)s)
    ON CONFLICT (kind, dedup_key) WHERE status = 'pending' AND dedup_key IS NOT NULL
    DO NOTHING
    RETURNING id, kind
)
SELECT inserted.id
FROM inserted CROSS JOIN LATERAL (SELECT pg_notify({channel}, inserted.kind)) AS n
