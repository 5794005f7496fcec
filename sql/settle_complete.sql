-- Completes a batch of claimed runs in one statement. Each row is fenced by owner, run
-- epoch and status, and journaled only when its transition applied.
-- Parameters: ids (uuid[]), owners (text[]), runs (int[]), attachments (JSON text[]),
-- notes (text[]), all sent in binary ("b" placeholders: no per-element quoting here).
-- Returns: the ids whose completion applied.
WITH batch AS (
    SELECT * FROM unnest(%(ids)b::uuid[], %(owners)b::text[], %(runs)b::integer[],
                         %(attachments)b::jsonb[], %(notes)b::text[])
        AS b (id, owner, run, attachment, note)
),
settled AS (
    UPDATE {jobs} AS j
    SET status = 'completed', finished_at = now(), claim_expires_at = NULL
    FROM batch AS b
    WHERE j.id = b.id AND j.claimed_by = b.owner AND j.run_count = b.run
      AND j.status = 'claimed'
    RETURNING j.id, j.kind, j.run_count, b.attachment, b.note
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, attachment)
    SELECT id, kind, run_count, 'completed', note, attachment FROM settled
)
SELECT id FROM settled
