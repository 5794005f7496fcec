-- Deletes one bounded batch of terminal jobs finished before a time (journal rows go by
-- cascade). The caller repeats until a batch comes back short, keeping locks brief.
-- Parameters: finished_before, kind, status (nullable), batch. Returns: rows deleted.
WITH doomed AS (
    SELECT id FROM {jobs}
    WHERE finished_at < %(finished_before)s
      AND status IN ('completed', 'dead', 'cancelled')
      AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
      AND (%(status)s::text IS NULL OR status = %(status)s::text)
    ORDER BY finished_at
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM {jobs} AS j USING doomed WHERE j.id = doomed.id RETURNING 1
)
SELECT count(*) FROM deleted
