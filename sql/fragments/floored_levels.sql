-- Fragment {floored_levels}: as {pending_levels} (the recursive CTE `levels` of each
-- kind in CTE `wanted`), its top probes started from floors, and the CTE `tops` (kind,
-- priority, first_at, first_id) with each kind's first pending job at or above
-- %(priority_floor)s in claim order (NULLs when none), for claim_floored.sql to report.
-- A probe from the start steps over the index entries of every job claimed since the
-- last vacuum (all of them while a held-back xmin horizon stops vacuum). A kind's floor
-- (the parameters floor_kinds, floor_priorities, floor_ats, floor_ids, floor_snapshots:
-- the first pending job an earlier statement found, and that statement's snapshot as
-- text, or a NULL job when it found none; floor_server: the server they were found on, as
-- fragment floor_server names it, for floors found on another are ignored) lets the top
-- probe start there instead. Every
-- job pending now and before the floor in claim order was made pending (or moved) by a
-- transaction that snapshot did not see, and so carries a pended_xid at or past its xmax
-- (and before the current snapshot's) or among its in-progress transactions (migration
-- 0017): the pended index finds those, by a range of it and by one lookup per running
-- transaction (OFFSET 0 keeps each a lookup: as a join, a generic plan may read every
-- entry of the kind instead). Its
-- predicate (pending or waiting) is one the claim index's does not imply, so the planner
-- cannot read them from the claim index, past the very entries the floor steps over;
-- OFFSET 0 keeps "pending" out of that scan.
tops (kind, priority, first_at, first_id) AS (
    SELECT wanted.kind, top.priority, top.visible_at, top.id
    FROM wanted
    LEFT JOIN (
        SELECT f.kind, f.priority, f.visible_at, f.id, f.snapshot::pg_snapshot AS snapshot
        FROM unnest(
            %(floor_kinds)s::text[], %(floor_priorities)s::int[],
            %(floor_ats)s::timestamptz[], %(floor_ids)s::uuid[], %(floor_snapshots)s::text[]
        ) AS f (kind, priority, visible_at, id, snapshot)
        WHERE %(floor_server)s::text = {floor_server}
    ) AS floor ON floor.kind = wanted.kind
    LEFT JOIN LATERAL (
        SELECT t.priority, t.visible_at, t.id
        FROM (
            (SELECT j.priority, j.visible_at, j.id FROM {jobs} AS j
             WHERE floor.snapshot IS NULL
               AND j.status = 'pending' AND j.kind = wanted.kind
               AND j.priority >= %(priority_floor)s
             ORDER BY j.priority DESC, j.visible_at, j.id
             LIMIT 1)
            UNION ALL
            (SELECT s.priority, s.visible_at, s.id
             FROM (
                 SELECT j.status, j.priority, j.visible_at, j.id FROM {jobs} AS j
                 WHERE floor.snapshot IS NOT NULL
                   AND j.status IN ('pending', 'waiting') AND j.kind = wanted.kind
                   AND j.pended_xid >= pg_snapshot_xmax(floor.snapshot)
                   AND j.pended_xid < pg_snapshot_xmax(pg_current_snapshot())
                 UNION ALL
                 SELECT r.status, r.priority, r.visible_at, r.id
                 FROM pg_snapshot_xip(floor.snapshot) AS running (xid)
                 CROSS JOIN LATERAL (
                     SELECT j.status, j.priority, j.visible_at, j.id FROM {jobs} AS j
                     WHERE j.pended_xid = running.xid
                       AND j.status IN ('pending', 'waiting') AND j.kind = wanted.kind
                     OFFSET 0
                 ) AS r
                 OFFSET 0
             ) AS s
             WHERE s.status = 'pending' AND s.priority >= %(priority_floor)s
             ORDER BY s.priority DESC, s.visible_at, s.id
             LIMIT 1)
            UNION ALL
            (SELECT r.priority, r.visible_at, r.id
             FROM (
                 (SELECT j.priority, j.visible_at, j.id FROM {jobs} AS j
                  WHERE floor.priority IS NOT NULL
                    AND j.status = 'pending' AND j.kind = wanted.kind
                    AND j.priority = floor.priority
                    AND (j.visible_at, j.id) >= (floor.visible_at, floor.id)
                    AND j.priority >= %(priority_floor)s
                  ORDER BY j.visible_at, j.id
                  LIMIT 1)
                 UNION ALL
                 (SELECT j.priority, j.visible_at, j.id FROM {jobs} AS j
                  WHERE floor.priority IS NOT NULL
                    AND j.status = 'pending' AND j.kind = wanted.kind
                    AND j.priority < floor.priority AND j.priority >= %(priority_floor)s
                  ORDER BY j.priority DESC, j.visible_at, j.id
                  LIMIT 1)
             ) AS r
             LIMIT 1)
        ) AS t
        ORDER BY t.priority DESC, t.visible_at, t.id
        LIMIT 1
    ) AS top ON true
),
levels (kind, priority, first_at, first_id) AS (
    SELECT tops.kind, tops.priority, tops.first_at, tops.first_id
    FROM tops
    WHERE tops.priority IS NOT NULL
    UNION ALL
    {lower_levels}
)
