-- Resumes paused kinds and notifies the channel once for each, so idle workers claim at
-- once (the notification is delivered when this commits).
-- Parameters: kinds (text[]). Returns: the kinds that were paused.
WITH resumed AS (
    UPDATE {kinds} AS k
    SET paused = false, paused_at = NULL
    WHERE k.kind = ANY(%(kinds)s::text[]) AND k.paused
    RETURNING k.kind
)
SELECT resumed.kind
FROM resumed CROSS JOIN LATERAL (SELECT pg_notify({channel}, resumed.kind)) AS n
