-- When the next pending job of the given kinds becomes claimable. A loose index scan
-- visits each pending (kind, priority) of the claim index once and takes its first
-- visible_at: a few probes at any backlog (see seconds_until_visible.sql).
-- Parameters: kinds (text[]). Returns: one timestamptz, or NULL when nothing is pending.
WITH RECURSIVE levels (kind, priority) AS (
    SELECT w.kind, top.priority
    FROM unnest(%(kinds)s::text[]) AS w (kind)
    CROSS JOIN LATERAL (
        SELECT j.priority FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = w.kind
        ORDER BY j.priority DESC
        LIMIT 1
    ) AS top
    UNION ALL
    SELECT levels.kind, lower.priority
    FROM levels
    CROSS JOIN LATERAL (
        SELECT j.priority FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = levels.kind
          AND j.priority < levels.priority
        ORDER BY j.priority DESC
        LIMIT 1
    ) AS lower
)
SELECT min(first.visible_at)
FROM levels
CROSS JOIN LATERAL (
    SELECT j.visible_at FROM {jobs} AS j
    WHERE j.status = 'pending' AND j.kind = levels.kind AND j.priority = levels.priority
    ORDER BY j.visible_at
    LIMIT 1
) AS first
