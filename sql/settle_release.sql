-- Hands a claimed job back untouched: pending again at its old place in line, no failure
-- counted. Used for prefetched jobs that never started and for a stopping worker.
-- Parameters: id, owner, run, note, facts (fragment run_facts). Returns: the journal outcome when applied.
WITH settled AS (
    UPDATE {jobs} AS j
    SET status = 'pending', claimed_by = NULL, claim_expires_at = NULL,
        dedup_key = {dedup_key_kept}
    FROM {one_run} AS b
    WHERE {held_by_run}
    RETURNING j.id, j.kind, j.run_count, j.status
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, facts)
    SELECT id, kind, run_count, 'released', %(note)s, {run_facts} FROM settled
    RETURNING kind, outcome
)
SELECT journaled.outcome
FROM journaled CROSS JOIN LATERAL (SELECT pg_notify({channel}, journaled.kind)) AS n
