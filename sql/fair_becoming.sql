-- Which of the kinds a declaration names fair the database does not hold fair yet:
-- declaring them fair must tag their jobs already written (fair_tag_existing.sql).
-- Locks the row of every kind the declaration names, in kind order (the order claims
-- lock them in), writing one for each kind that has none (no limits, not fair; replaced
-- by declare_kinds.sql later in this transaction), so that the transaction holds all
-- the rows it writes before it locks the jobs table (fair_jobs_lock.sql): two workers
-- declaring at once take turns, and none waits for a row while holding the jobs table.
-- Parameters: kinds (text[]), fairs (boolean[], one per kind), declared_by.
-- Returns: each kind declared fair that is not fair yet.
WITH locked AS (
    INSERT INTO {kinds} AS k (kind, declared_by, declared_at)
    SELECT d.kind, %(declared_by)s, now()
    FROM unnest(%(kinds)s::text[]) AS d (kind)
    ORDER BY d.kind
    ON CONFLICT (kind) DO UPDATE SET kind = excluded.kind
    RETURNING k.kind, k.fair
)
SELECT locked.kind
FROM locked
JOIN unnest(%(kinds)s::text[], %(fairs)s::boolean[]) AS d (kind, fair) ON d.kind = locked.kind
WHERE d.fair AND NOT locked.fair
ORDER BY locked.kind
