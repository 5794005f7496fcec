-- When the next pending job of the given kinds at or above a priority floor becomes
-- claimable, with the database clock beside it: the idle worker sleeps the difference
-- (below-floor jobs are never its concern, so they do not wake it).
-- The claim index orders visible_at within each priority, so the loose index scan of
-- `levels` visits each pending (kind, priority) once and takes its first visible_at: a
-- few probes at any backlog, where min(visible_at) over the kind would read every row.
-- Paused kinds are left out: their jobs wake no one until the kind is resumed.
-- Parameters: kinds (text[]), priority_floor. Returns: one row (visible_at or NULL, now).
WITH RECURSIVE wanted AS (
    SELECT w.kind FROM unnest(%(kinds)s::text[]) AS w (kind)
    WHERE NOT EXISTS (SELECT FROM {kinds} AS k WHERE k.kind = w.kind AND k.paused)
),
{pending_levels}
SELECT min(first.visible_at), now()
FROM levels
CROSS JOIN LATERAL (
    SELECT j.visible_at FROM {jobs} AS j
    WHERE j.status = 'pending' AND j.kind = levels.kind AND j.priority = levels.priority
    ORDER BY j.visible_at
    LIMIT 1
) AS first
