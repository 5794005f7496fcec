-- Deletes one batch of jobs of one terminal status that finished more than `keep` seconds
-- ago (their journal goes by cascade), oldest first from a keyset position: rows of
-- other statuses are passed once per prune, not once per batch. Locked rows are skipped,
-- and each batch is its own short transaction.
-- Parameters: status, keep (s), after (the last finished_at of the previous batch, or
-- null), batch. Returns: rows deleted and the latest finished_at among them.
WITH doomed AS (
    SELECT id FROM {jobs}
    WHERE finished_at IS NOT NULL
      AND finished_at >= coalesce(%(after)s::timestamptz, '-infinity')
      AND finished_at < now() - make_interval(secs => %(keep)s::float8)
      AND status = %(status)s::text
    ORDER BY finished_at
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM {jobs} AS j USING doomed WHERE j.id = doomed.id RETURNING j.finished_at
)
SELECT count(*), max(finished_at) FROM deleted
