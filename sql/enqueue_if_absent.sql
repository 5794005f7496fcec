-- Inserts a job with a dedup key only if no pending job holds the key (merge-function path).
-- Parameters: id, kind, payload, priority, delay | at, max_attempts, dedup_key.
-- Returns: id when inserted, no row when the key is held.
WITH inserted AS (
    INSERT INTO {jobs} {new_job}
    {pending_key_taken}
    DO NOTHING
    RETURNING id, kind
)
SELECT inserted.id
FROM inserted CROSS JOIN LATERAL (SELECT pg_notify({channel}, inserted.kind)) AS n
