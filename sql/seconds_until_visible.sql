-- Seconds until the next pending job of the given kinds becomes claimable, measured on
-- the database clock (0 when one is due already): the idle worker's sleep. Jobs below
-- the worker's priority floor are never its concern, so they do not wake it.
-- Parameters: kinds (text[]), priority_floor. Returns: one float8, or NULL when none.
SELECT greatest(0, extract(epoch FROM min(n.visible_at) - now()))::float8
FROM unnest(%(kinds)s::text[]) AS w (kind)
CROSS JOIN LATERAL (
    SELECT min(j.visible_at) AS visible_at
    FROM {jobs} AS j
    WHERE j.status = 'pending' AND j.kind = w.kind AND j.priority >= %(priority_floor)s
) AS n
