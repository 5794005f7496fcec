-- Pauses kinds: the claims of every worker leave them alone from this commit on (both
-- claim statements read the flag), and pending jobs stay pending. Running jobs go on.
-- Parameters: kinds (text[]). Returns: the kinds that were not paused before.
INSERT INTO {kinds} AS k (kind, paused, paused_at)
SELECT p.kind, true, now()
FROM unnest(%(kinds)s::text[]) AS p (kind)
ORDER BY p.kind
ON CONFLICT (kind) DO UPDATE
SET paused = true, paused_at = excluded.paused_at
WHERE NOT k.paused
RETURNING k.kind
