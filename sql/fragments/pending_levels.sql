-- Fragment {pending_levels}: the recursive CTE `levels` (kind, priority) of each distinct
-- pending priority at or above %(priority_floor)s of every kind in CTE `wanted` (kind).
-- The claim index is (kind, priority DESC, visible_at, id) WHERE pending: a loose index
-- scan probes it once per priority, where reading the pending rows would cost the backlog.
levels (kind, priority) AS (
    SELECT wanted.kind, top.priority
    FROM wanted
    CROSS JOIN LATERAL (
        SELECT j.priority FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = wanted.kind
          AND j.priority >= %(priority_floor)s
        ORDER BY j.priority DESC
        LIMIT 1
    ) AS top
    UNION ALL
    SELECT levels.kind, lower.priority
    FROM levels
    CROSS JOIN LATERAL (
        SELECT j.priority FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = levels.kind
          AND j.priority < levels.priority AND j.priority >= %(priority_floor)s
        ORDER BY j.priority DESC
        LIMIT 1
    ) AS lower
)
