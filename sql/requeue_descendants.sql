-- Puts the cancelled descendants of a requeued job back to waiting, each for its parents
-- that have not completed (the requeued job among them), with a fresh failure count and
-- those parents' edges open again; journals each as requeued. Runs after lock_descendants
-- in the same transaction.
-- Parameters: id (the requeued job), note. Returns: one row per job requeued.
WITH RECURSIVE {cancelled_descendants},
reopened AS (
    UPDATE {deps} AS d
    SET open = true
    FROM {jobs} AS p
    WHERE d.child_id IN (SELECT id FROM tree) AND p.id = d.parent_id AND p.status <> 'completed'
),
requeued AS (
    UPDATE {jobs} AS j
    SET status = 'waiting', failure_count = 0, finished_at = NULL, claimed_by = NULL,
        claim_expires_at = NULL, visible_at = now(),
        parents_left = (SELECT count(*)
                        FROM {deps} AS d JOIN {jobs} AS p ON p.id = d.parent_id
                        WHERE d.child_id = j.id AND p.status <> 'completed')
    WHERE j.id IN (SELECT id FROM tree) AND j.status = 'cancelled'
    RETURNING j.id, j.kind, j.run_count
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'requeued', %(note)s FROM requeued
)
SELECT id FROM requeued
