-- Enqueues one run of a schedule now, outside its slot bookkeeping (the row is only
-- read): the schedule's kind and payload, with scheduled_at = now() if it takes the slot,
-- and the concurrency key the caller's code gives the schedule. The row does not keep
-- the key: a kind whose declared limits have a key limit is refused without one (nothing
-- is inserted).
-- Parameters: id, name, concurrency_key (NULL: none).
-- Returns: the new job's id (NULL when refused) and whether the kind needed a key; no
-- row for an unknown schedule.
WITH source AS (
    SELECT s.kind, s.payload, s.with_slot, s.priority, s.max_attempts,
           %(concurrency_key)s::text IS NULL AND EXISTS (
               SELECT FROM {kinds} AS k
               WHERE k.kind = s.kind AND k.key_concurrency IS NOT NULL) AS needs_key
    FROM {schedules} AS s
    WHERE s.name = %(name)s
),
inserted AS (
    INSERT INTO {jobs} (id, kind, payload, priority, max_attempts, concurrency_key)
    SELECT %(id)s, kind,
           CASE WHEN with_slot
                THEN payload || jsonb_build_object('scheduled_at', to_char(
                    now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'))
                ELSE payload END,
           priority, max_attempts, %(concurrency_key)s::text
    FROM source
    WHERE NOT source.needs_key
    RETURNING id, kind
),
notified AS (
    SELECT inserted.id, pg_notify({channel}, inserted.kind) FROM inserted
)
SELECT notified.id, source.needs_key
FROM source
LEFT JOIN notified ON true
