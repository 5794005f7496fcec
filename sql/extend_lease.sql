-- Extends the leases of running jobs still held by their run; the heartbeat's one query.
-- Rows are locked in id order and locked rows are skipped, never waited for: a heartbeat
-- cannot deadlock with a batched completion, and a row another session holds locked (a
-- user's SELECT ... FOR UPDATE) does not stall the renewal of the others.
-- Parameters: ids (uuid[]), owners (text[]), runs (int[]), leases (float8[] seconds).
-- Returns: (id, true) for each renewed lease; (id, false) for a run still held whose row
-- was locked (lease untouched); a missing id lost its lease or was cancelled.
WITH batch AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(owners)s::text[], %(runs)s::integer[],
                         %(leases)s::float8[])
        AS b (id, owner, run, lease)
),
{locked_runs},
renewed AS (
    UPDATE {jobs} AS j
    SET claim_expires_at = now() + make_interval(secs => b.lease)
    FROM locked AS b
    WHERE j.id = b.id
    RETURNING j.id
)
SELECT id, true FROM renewed
UNION ALL
{busy_runs}
