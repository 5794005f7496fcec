-- Stores a merged payload on the locked pending holder and journals the merge.
-- Parameters: id, payload (JSON text), note. Returns: id when applied.
WITH updated AS (
    UPDATE {jobs} SET payload = %(payload)s::jsonb
    WHERE id = %(id)s AND status = 'pending'
    RETURNING id, kind, run_count
),
merged AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT id, kind, run_count, 'merged', %(note)s FROM updated
)
SELECT updated.id
FROM updated CROSS JOIN LATERAL (SELECT pg_notify({channel}, updated.kind)) AS n
