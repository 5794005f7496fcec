-- Resumes paused kinds and notifies the channel once for each, so idle workers claim at
-- once (the notification is delivered when this commits). The rows are locked in kind
-- order first, the order claims take them in, so a resume never deadlocks with a claim.
-- Parameters: kinds (text[]). Returns: the kinds that were paused.
WITH locked AS (
    SELECT k.kind FROM {kinds} AS k
    WHERE k.kind = ANY(%(kinds)s::text[]) AND k.paused
    ORDER BY k.kind
    FOR UPDATE
),
resumed AS (
    UPDATE {kinds} AS k
    SET paused = false, paused_at = NULL
    FROM locked
    WHERE k.kind = locked.kind AND k.paused
    RETURNING k.kind
)
SELECT resumed.kind
FROM resumed CROSS JOIN LATERAL (SELECT pg_notify({channel}, resumed.kind)) AS n
