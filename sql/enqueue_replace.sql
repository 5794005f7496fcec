-- Enqueues a job with a dedup key; if a pending job holds the key, its payload, priority,
-- visibility, attempts and concurrency key are replaced by the new ones (one 'merged' journal row).
-- ON CONFLICT DO UPDATE makes this atomic against racing enqueues.
-- Parameters: id, kind, payload, priority, delay | at, max_attempts, dedup_key.
-- Returns: (id, created).
WITH upserted AS (
    INSERT INTO {jobs} AS j {new_job}
    {pending_key_taken}
    DO UPDATE SET payload = EXCLUDED.payload,
                  priority = EXCLUDED.priority,
                  visible_at = EXCLUDED.visible_at,
                  max_attempts = EXCLUDED.max_attempts,
                  concurrency_key = EXCLUDED.concurrency_key
    RETURNING j.id, j.kind, j.run_count, (j.xmax = 0) AS created
),
merged AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'merged', 'duplicate enqueue replaced the payload'
    FROM upserted WHERE NOT created
)
SELECT upserted.id, upserted.created
FROM upserted CROSS JOIN LATERAL (SELECT pg_notify({channel}, upserted.kind)) AS n
