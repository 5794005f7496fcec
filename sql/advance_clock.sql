-- Moves the prefix's unfinished jobs %(seconds)s into the past, as if that much time had
-- gone by (venturi.testing.advance; the server's clock is left alone): pending jobs were
-- enqueued and come due that much earlier, claims expire that much earlier. One
-- notification per kind moved wakes the workers to claim what came due.
-- Parameters: seconds. Returns: one row per kind moved.
WITH moved AS (
    UPDATE {jobs}
    SET created_at = CASE WHEN status = 'pending'
                          THEN created_at - make_interval(secs => %(seconds)s) ELSE created_at END,
        visible_at = CASE WHEN status = 'pending'
                          THEN visible_at - make_interval(secs => %(seconds)s) ELSE visible_at END,
        claim_expires_at = claim_expires_at - make_interval(secs => %(seconds)s)
    WHERE status IN ('pending', 'claimed')
    RETURNING kind
)
SELECT k.kind
FROM (SELECT DISTINCT kind FROM moved) AS k
CROSS JOIN LATERAL (SELECT pg_notify({channel}, k.kind)) AS n
