-- Fires one schedule's due slots: moves its next slot on and inserts one job per slot in
-- one statement, so the jobs and the bookkeeping commit together. The update is fenced
-- on the next slot (and fingerprint) the caller read: a worker that lost the race finds
-- the row moved on, updates nothing, and so inserts nothing. NOTIFY rides along.
-- Parameters: name, fingerprint, expected (next_slot as read), last_slot, next_slot, kind,
-- priority, max_attempts, concurrency_key (NULL: none), arrays ids and payloads (JSON text).
-- Returns: whether this call fired the slots, and how many jobs it inserted.
WITH advanced AS (
    UPDATE {schedules}
    SET last_slot = coalesce(%(last_slot)s::timestamptz, last_slot),
        next_slot = %(next_slot)s,
        fired_at = now()
    WHERE name = %(name)s
      AND active
      AND fingerprint = %(fingerprint)s
      AND next_slot = %(expected)s
      AND next_slot <= now()
    RETURNING name
),
inserted AS (
    INSERT INTO {jobs} (id, kind, payload, priority, max_attempts, concurrency_key)
    SELECT n.id, %(kind)s, n.payload::jsonb, %(priority)s, %(max_attempts)s,
           %(concurrency_key)s::text
    FROM unnest(%(ids)s::uuid[], %(payloads)s::text[]) AS n(id, payload)
    WHERE EXISTS (SELECT FROM advanced)
    RETURNING id
),
counted AS (
    SELECT count(*) AS jobs FROM inserted
)
SELECT EXISTS (SELECT FROM advanced), counted.jobs
FROM counted
LEFT JOIN LATERAL (
    SELECT pg_notify({channel}, %(kind)s) WHERE counted.jobs > 0
) AS n ON true
