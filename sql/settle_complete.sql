-- Completes a batch of claimed runs in one statement. Each row is fenced by owner, run
-- epoch and status, and journaled only when its transition applied. Rows are locked in
-- id order and locked rows are skipped, never waited for (no deadlock with a heartbeat,
-- no stall behind one row a user holds locked): the caller tries those again later.
-- A transactional run (within_lease true) completes only while its lease still holds at
-- this statement: its transaction may have outlived the lease, and then it must not apply.
-- Times are the statement's, not now(): in a transactional run now() is when the
-- handler's transaction began. Children of the completed jobs that have any are
-- released, and waiters of awaited ones woken, in this transaction (fragment jobs_finished).
-- Parameters: ids (uuid[]), owners (text[]), runs (int[]), attachments (JSON text[]),
-- notes (text[]), facts (JSON text[]: each run's facts, the worker's name added as in
-- fragment run_facts), all sent in binary ("b" placeholders: no per-element quoting here);
-- within_lease (boolean).
-- Returns: (id, true) for each completion applied; (id, false) for a run still held
-- whose row was locked (nothing changed); a missing id was fenced out.
WITH batch AS (
    SELECT * FROM unnest(%(ids)b::uuid[], %(owners)b::text[], %(runs)b::integer[],
                         %(attachments)b::jsonb[], %(notes)b::text[], %(facts)b::jsonb[])
        AS b (id, owner, run, attachment, note, facts)
),
{locked_runs},
settled AS (
    UPDATE {jobs} AS j
    SET status = 'completed', finished_at = statement_timestamp(), claim_expires_at = NULL
    FROM locked AS b
    WHERE j.id = b.id
      AND (NOT %(within_lease)s::boolean OR j.claim_expires_at > statement_timestamp())
    RETURNING j.id, j.kind, j.run_count, j.status, b.attachment, b.note, j.has_children,
              j.awaited, b.owner, b.facts
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, attachment, recorded_at, facts)
    SELECT id, kind, run_count, 'completed', note, attachment, statement_timestamp(),
           coalesce(facts, '{{}}') || jsonb_build_object('worker', owner)
    FROM settled
),
-- Reads `settled` as a whole, so it runs once the whole batch is settled.
{jobs_finished}
SELECT id, true
FROM settled
CROSS JOIN (SELECT count(*) FROM finished) AS f
UNION ALL
{busy_runs}
