-- Fragment {lower_levels}: the recursive step of the CTE `levels` (kind, priority,
-- first_at, first_id): the next pending priority below each found one, at or above
-- %(priority_floor)s, with its first pending job.
SELECT levels.kind, lower.priority, lower.visible_at, lower.id
FROM levels
CROSS JOIN LATERAL (
    SELECT j.priority, j.visible_at, j.id FROM {jobs} AS j
    WHERE j.status = 'pending' AND j.kind = levels.kind
      AND j.priority < levels.priority AND j.priority >= %(priority_floor)s
    ORDER BY j.priority DESC, j.visible_at, j.id
    LIMIT 1
) AS lower
