-- Enqueues a job with a dedup key; if a pending job holds the key, its payload, priority,
-- visibility and attempts are replaced by the new ones (one 'merged' journal row).
-- ON CONFLICT DO UPDATE makes this atomic against racing enqueues.
-- Parameters: id, kind, payload, priority, delay | at, max_attempts, dedup_key.
-- Returns: (id, created).
WITH upserted AS (
    INSERT INTO {jobs} AS j (id, kind, payload, priority, visible_at, max_attempts, dedup_key)
    VALUES (
        %(id)s, %(kind)s, %(payload)s::jsonb, %(priority)s,
        coalesce(%(at)s::timestamptz,
                 now() + make_interval(secs => coalesce(%(delay)s::float8, 0))),
        %(max_attempts)s, %(dedup_key)s)
    ON CONFLICT (kind, dedup_key) WHERE status = 'pending' AND dedup_key IS NOT NULL
    DO UPDATE SET payload = EXCLUDED.payload,
                  priority = EXCLUDED.priority,
                  visible_at = EXCLUDED.visible_at,
                  max_attempts = EXCLUDED.max_attempts
    RETURNING j.id, j.kind, j.run_count, (j.xmax = 0) AS created
),
merged AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'merged', 'duplicate enqueue replaced the payload'
    FROM upserted WHERE NOT created
)
SELECT upserted.id, upserted.created
FROM upserted CROSS JOIN LATERAL (SELECT pg_notify({channel}, upserted.kind)) AS n
