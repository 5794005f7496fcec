-- Claims up to %(limit)s due jobs of kinds with a key limit, within each kind's room
-- (fragment limited_room) and each concurrency key's: its key_concurrency less the key's claimed
-- jobs. Runs after claim_limited_lock.sql in the same transaction, while the kinds' rows
-- stay locked. A loose index scan of the key index walks each kind's distinct pending
-- keys and reads only each free key's first jobs: a busy key's backlog is never read, so
-- it holds back no other key. A keyed kind's jobs without a key (enqueued where the kind
-- was not registered) are read past its keyed ones. A fair kind's free keys take turns by
-- their first jobs' tags.
-- Parameters: kinds (text[]), leases (float8[]), priority_floor, limit, worker.
-- Returns: the claimed jobs (JobRecord.from_row order), unordered.
WITH RECURSIVE {limited_room},
keyed AS (
    SELECT room.kind, room.places, coalesce(room.key_concurrency, room.places) AS per_key
    FROM room WHERE room.places > 0
),
keys (kind, key) AS (
    SELECT keyed.kind, first.concurrency_key
    FROM keyed
    CROSS JOIN LATERAL (
        SELECT j.concurrency_key FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.concurrency_key IS NOT NULL AND j.kind = keyed.kind
        ORDER BY j.concurrency_key
        LIMIT 1
    ) AS first
    UNION ALL
    SELECT keys.kind, later.concurrency_key
    FROM keys
    CROSS JOIN LATERAL (
        SELECT j.concurrency_key FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.concurrency_key IS NOT NULL AND j.kind = keys.kind
          AND j.concurrency_key > keys.key
        ORDER BY j.concurrency_key
        LIMIT 1
    ) AS later
),
candidates AS (
    SELECT c.id, c.kind, c.priority, c.visible_at, c.fair_tag
    FROM keys
    JOIN keyed ON keyed.kind = keys.kind
    CROSS JOIN LATERAL (
        SELECT keyed.per_key - count(*) AS free FROM {jobs} AS r
        WHERE r.status = 'claimed' AND r.concurrency_key IS NOT NULL
          AND r.kind = keys.kind AND r.concurrency_key = keys.key
    ) AS busy
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.priority, j.visible_at, j.fair_tag
        FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.concurrency_key IS NOT NULL
          AND j.kind = keys.kind AND j.concurrency_key = keys.key
          AND j.visible_at <= now() AND j.priority >= %(priority_floor)s
        ORDER BY j.priority DESC, j.visible_at, j.id
        LIMIT least(greatest(busy.free, 0), keyed.places)
        FOR UPDATE SKIP LOCKED
    ) AS c
    UNION ALL
    SELECT c.id, c.kind, c.priority, c.visible_at, c.fair_tag
    FROM keyed
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.priority, j.visible_at, j.fair_tag
        FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = keyed.kind AND j.concurrency_key IS NULL
          AND j.visible_at <= now() AND j.priority >= %(priority_floor)s
        ORDER BY j.priority DESC, j.visible_at, j.id
        LIMIT keyed.places
        FOR UPDATE SKIP LOCKED
    ) AS c
),
{limited_claimed}
SELECT * FROM claimed
