-- Fragment {floored_picked}: claim.sql's CTEs `placeable` and `placed` (fragment
-- fair_candidates), `candidates` and `picked` for claim_floored.sql: from the CTEs
-- `levels` (fragment floored_levels) and `wanted`, up to %(limit)s due jobs, highest
-- priority first, then the longest visible, each with its kind's lease; each plain
-- kind's priority's range read starts at its first pending job, where its probe landed.
{fair_candidates},
candidates AS (
    SELECT c.id, c.priority, c.visible_at AS place_at, c.id AS place_id, wanted.lease
    FROM levels
    JOIN wanted ON wanted.kind = levels.kind AND NOT wanted.fair
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.visible_at
        FROM {jobs} AS j
        WHERE j.status = 'pending'
          AND j.kind = levels.kind
          AND j.priority = levels.priority
          AND (j.visible_at, j.id) >= (levels.first_at, levels.first_id)
          AND j.visible_at <= now()
        ORDER BY j.visible_at, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
    UNION ALL
    SELECT placed.id, placed.priority, placed.place_at, placed.place_id, placed.lease
    FROM placed
),
picked AS (
    SELECT candidates.id AS picked_id, candidates.lease
    FROM candidates
    ORDER BY candidates.priority DESC, candidates.place_at, candidates.place_id
    LIMIT %(limit)s
)
