-- Settles a batch of claimed runs in one statement, whatever each run's end: the one write
-- of a run's end. Per run (action): complete; retry (a counted failure: pending after
-- its delay, dead once failure_count reaches max_attempts); pause (pending at `at` or
-- after its delay, no failure counted); dead; release (pending at its old place, never
-- started); recover (the reaper's: a failure like retry, for a run whose lease lapsed).
-- Each row is fenced by owner, run epoch and status, a recovery also by its lease having
-- expired, and a transactional run (within_lease) by its lease still holding at this
-- statement; journaled only when its transition applied. Rows are locked in id order and
-- locked rows are skipped, never waited for (no deadlock with a heartbeat, no stall behind
-- one row a user holds locked): the caller tries those again. A job going back to pending
-- gives up its dedup key when a newer pending job holds it. Times are the statement's, not
-- now(): in a transactional run now() is when the handler's transaction began. Children
-- of finished jobs are released or cancelled and waiters woken (fragment jobs_finished);
-- each kind with a job claimable again is notified, and with `announce` each kind whose
-- runs hold a concurrency or key limit's place (a place opened for every worker).
-- Parameters (arrays sent in binary, "b" placeholders: no per-element quoting here): ids
-- (uuid[]), owners (text[]), runs (int[]), actions (text[]), delays (float8[] seconds or
-- null), ats (timestamptz[] or null), carries (JSON text[], null: keep the carry), notes
-- (text[]), attachments (JSON text[]), facts (JSON text[]: each run's facts, the worker's
-- name added as "worker"); within_lease, announce (booleans).
-- Returns: (id, journal outcome) for each run settled; (id, NULL) for a run still held
-- whose row was locked (nothing changed); a missing id was fenced out.
WITH batch AS (
    SELECT * FROM unnest(%(ids)b::uuid[], %(owners)b::text[], %(runs)b::integer[],
                         %(actions)b::text[], %(delays)b::float8[], %(ats)b::timestamptz[],
                         %(carries)b::jsonb[], %(notes)b::text[], %(attachments)b::jsonb[],
                         %(facts)b::jsonb[])
        AS b (id, owner, run, action, delay, at, carry, note, attachment, facts)
),
-- Each run's end decided once, from the row as locked: a failure past max_attempts is
-- dead, any other failure, pause or release pending again.
locked AS (
    SELECT b.*,
           CASE WHEN b.action IN ('retry', 'recover') THEN 1 ELSE 0 END AS failed,
           CASE WHEN b.action = 'complete' THEN 'completed'
                WHEN b.action = 'dead' THEN 'dead'
                WHEN b.action IN ('retry', 'recover')
                     AND j.failure_count + 1 >= j.max_attempts THEN 'dead'
                ELSE 'pending' END AS ending
    FROM {jobs} AS j JOIN batch AS b ON j.id = b.id
    WHERE {held_by_run}
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
),
settled AS (
    UPDATE {jobs} AS j
    SET status = b.ending,
        failure_count = j.failure_count + b.failed,
        finished_at = CASE WHEN b.ending <> 'pending' THEN statement_timestamp() END,
        visible_at = CASE WHEN b.ending <> 'pending' OR b.action = 'release' THEN j.visible_at
                          ELSE coalesce(b.at, statement_timestamp()
                                              + make_interval(secs => coalesce(b.delay, 0)))
                     END,
        carry = coalesce(b.carry, j.carry),
        claimed_by = CASE WHEN b.action = 'release' THEN NULL ELSE j.claimed_by END,
        claim_expires_at = NULL,
        -- A newer pending job may hold the key (the unique index allows one pending
        -- holder); then this one gives it up.
        dedup_key = CASE WHEN b.ending = 'pending' AND EXISTS (
                             SELECT FROM {jobs} AS d
                             WHERE d.kind = j.kind AND d.dedup_key = j.dedup_key
                               AND d.status = 'pending')
                         THEN NULL ELSE j.dedup_key END
    FROM locked AS b
    WHERE j.id = b.id
      AND (b.action <> 'recover' OR j.claim_expires_at < statement_timestamp())
      AND (NOT %(within_lease)s::boolean OR j.claim_expires_at > statement_timestamp())
    RETURNING j.id, j.kind, j.run_count, j.status, j.has_children, j.awaited, b.action,
              b.note, b.attachment, b.facts, b.owner
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, attachment, recorded_at, facts)
    SELECT id, kind, run_count,
           CASE WHEN action = 'complete' THEN 'completed'
                WHEN status = 'dead' THEN 'dead'
                WHEN action = 'retry' THEN 'retried'
                WHEN action = 'recover' THEN 'recovered'
                WHEN action = 'pause' THEN 'paused'
                ELSE 'released' END,
           note || CASE WHEN action = 'recover' AND status = 'dead'
                        THEN '; max_attempts reached' ELSE '' END,
           attachment, statement_timestamp(),
           coalesce(facts, '{{}}') || jsonb_build_object('worker', owner)
    FROM settled
    RETURNING job_id, outcome
),
-- Reads `settled` as a whole, so it runs once the whole batch is settled.
{jobs_finished},
announced AS (
    SELECT count(*) FROM (
        SELECT pg_notify({channel}, s.kind)
        FROM (SELECT kind, bool_or(status = 'pending') AS repended
              FROM settled GROUP BY kind) AS s
        WHERE s.repended OR (%(announce)s::boolean AND EXISTS (
            SELECT FROM {kinds} AS k
            WHERE k.kind = s.kind
              AND (k.concurrency IS NOT NULL OR k.key_concurrency IS NOT NULL)))
    ) AS n
)
SELECT journaled.job_id, journaled.outcome
FROM journaled
CROSS JOIN (SELECT count(*) FROM finished) AS f
CROSS JOIN announced
UNION ALL
SELECT busy.id, NULL FROM ({busy_runs}) AS busy (id, held)
