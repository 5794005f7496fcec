-- Enqueues one run of a schedule now, outside its slot bookkeeping (the row is only
-- read): the schedule's kind and payload, with scheduled_at = now() if it takes the slot.
-- Parameters: id, name. Returns: the new job's id; no row for an unknown schedule.
WITH inserted AS (
    INSERT INTO {jobs} (id, kind, payload, priority, max_attempts)
    SELECT %(id)s, kind,
           CASE WHEN with_slot
                THEN payload || jsonb_build_object('scheduled_at', to_char(
                    now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'))
                ELSE payload END,
           priority, max_attempts
    FROM {schedules}
    WHERE name = %(name)s
    RETURNING id, kind
)
SELECT inserted.id
FROM inserted CROSS JOIN LATERAL (SELECT pg_notify({channel}, inserted.kind)) AS n
