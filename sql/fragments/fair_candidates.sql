-- Fragment {fair_candidates}: for claim.sql and fragment floored_picked, the CTE
-- `placeable` of each fair kind's candidates (id, kind, priority, visible_at, fair_tag,
-- lease): from the CTEs `levels` and `wanted`, each level's first %(limit)s due jobs in
-- tag order (fair_claim_idx), so its keys take turns (migration 0016 tells how tags are
-- written); then the CTE `placed` of fragment fair_places.
placeable AS (
    SELECT c.id, levels.kind, c.priority, c.visible_at, c.fair_tag, wanted.lease
    FROM levels
    JOIN wanted ON wanted.kind = levels.kind AND wanted.fair
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.visible_at, j.fair_tag
        FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL
          AND j.kind = levels.kind
          AND j.priority = levels.priority
          AND j.visible_at <= now()
        ORDER BY j.fair_tag, j.visible_at, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
),
{fair_places}
