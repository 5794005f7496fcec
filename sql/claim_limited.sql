-- Claims up to %(limit)s due jobs of kinds with a concurrency or a rate (and no key limit),
-- within each kind's room (fragment limited_room). Runs after claim_limited_lock.sql in the same
-- transaction, while the kinds' rows stay locked. The jobs are read like claim.sql's: a
-- loose index scan over each kind's pending priorities, then each range up to now(), a
-- fair kind's in tag order (fair_claim_idx).
-- Parameters: kinds (text[]), leases (float8[]), priority_floor, limit, worker.
-- Returns: the claimed jobs (JobRecord.from_row order), unordered.
WITH RECURSIVE {limited_room},
wanted AS (
    SELECT room.kind, room.places, room.fair FROM room WHERE room.places > 0
),
{pending_levels},
candidates AS (
    SELECT c.id, c.kind, c.priority, c.visible_at, c.fair_tag
    FROM levels
    JOIN wanted ON wanted.kind = levels.kind AND NOT wanted.fair
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.priority, j.visible_at, NULL::float8 AS fair_tag
        FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = levels.kind AND j.priority = levels.priority
          AND j.visible_at <= now()
        ORDER BY j.visible_at, j.id
        LIMIT wanted.places
        FOR UPDATE SKIP LOCKED
    ) AS c
    UNION ALL
    SELECT c.id, c.kind, c.priority, c.visible_at, c.fair_tag
    FROM levels
    JOIN wanted ON wanted.kind = levels.kind AND wanted.fair
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.priority, j.visible_at, j.fair_tag
        FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL
          AND j.kind = levels.kind AND j.priority = levels.priority
          AND j.visible_at <= now()
        ORDER BY j.fair_tag, j.visible_at, j.id
        LIMIT wanted.places
        FOR UPDATE SKIP LOCKED
    ) AS c
),
{limited_claimed}
SELECT * FROM claimed
