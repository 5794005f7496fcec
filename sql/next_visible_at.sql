-- When the next pending job of the given kinds becomes claimable, for the idle worker's
-- sleep. One probe per kind down the claim index keeps it cheap under a backlog.
-- Parameters: kinds (text[]). Returns: one timestamptz, or NULL when nothing is pending.
SELECT min(n.visible_at)
FROM unnest(%(kinds)s::text[]) AS w (kind)
CROSS JOIN LATERAL (
    SELECT min(j.visible_at) AS visible_at
    FROM {jobs} AS j
    WHERE j.status = 'pending' AND j.kind = w.kind
) AS n
