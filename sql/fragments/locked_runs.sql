-- Fragment {locked_runs}: the CTE `locked` (every column of `batch`) of the runs in CTE
-- `batch` still held by them, row-locked in id order; a row another session holds
-- locked is skipped, never waited for (no deadlock with a heartbeat or a batched
-- completion, no stall behind a user's SELECT ... FOR UPDATE). {busy_runs} reports the
-- skipped ones.
locked AS (
    SELECT b.*
    FROM {jobs} AS j JOIN batch AS b ON j.id = b.id
    WHERE {held_by_run}
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
)
