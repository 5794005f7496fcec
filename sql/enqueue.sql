-- Inserts one job and notifies the channel in the same statement, so the wakeup is
-- delivered exactly when the row commits (and never on rollback).
-- Parameters: id, kind, payload (JSON text), priority, delay (s) | at, max_attempts.
-- Returns: id.
WITH inserted AS (
    INSERT INTO {jobs} {new_job}
    RETURNING id, kind
)
SELECT inserted.id
FROM inserted CROSS JOIN LATERAL (SELECT pg_notify({channel}, inserted.kind)) AS n
