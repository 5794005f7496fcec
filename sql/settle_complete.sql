-- Completes a batch of claimed runs in one statement. Each row is fenced by owner, run
-- epoch and status, and journaled only when its transition applied. Rows are locked in
-- id order and locked rows are skipped, never waited for (no deadlock with a heartbeat,
-- no stall behind one row a user holds locked): the caller tries those again later.
-- Parameters: ids (uuid[]), owners (text[]), runs (int[]), attachments (JSON text[]),
-- notes (text[]), all sent in binary ("b" placeholders: no per-element quoting here).
-- Returns: (id, true) for each completion applied; (id, false) for a run still held
-- whose row was locked (nothing changed); a missing id was fenced out.
WITH batch AS (
    SELECT * FROM unnest(%(ids)b::uuid[], %(owners)b::text[], %(runs)b::integer[],
                         %(attachments)b::jsonb[], %(notes)b::text[])
        AS b (id, owner, run, attachment, note)
),
{locked_runs},
settled AS (
    UPDATE {jobs} AS j
    SET status = 'completed', finished_at = now(), claim_expires_at = NULL
    FROM locked JOIN batch AS b ON b.id = locked.id
    WHERE j.id = locked.id
    RETURNING j.id, j.kind, j.run_count, b.attachment, b.note
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, attachment)
    SELECT id, kind, run_count, 'completed', note, attachment FROM settled
),
-- Once the whole batch is settled: release the completed jobs' waiting children in this
-- transaction, and wake waiters with one notification for the batch.
finished AS (
    SELECT {finish_children}(s.ids, 'completed'), pg_notify({done_channel}, '')
    FROM (SELECT array_agg(id) AS ids FROM settled) AS s
    WHERE s.ids IS NOT NULL
)
SELECT id, true FROM settled CROSS JOIN (SELECT count(*) FROM finished) AS f
UNION ALL
{busy_runs}
