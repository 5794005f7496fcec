-- next_visible_at.sql's answer from floors (fragment floored_levels; `venturi.store.floors`):
-- when the next pending job of the given kinds at or above a priority floor becomes
-- claimable, with the database clock beside it, and the floors found on the way, so an
-- idle worker's look at the queue steps over none of the index entries of the jobs
-- claimed before. The store uses it while claims use claim_floored.sql.
-- Paused kinds are left out: their jobs wake no one until the kind is resumed.
-- Parameters: kinds (text[]), priority_floor, and the kinds' floors (floor_kinds,
-- floor_priorities, floor_ats, floor_ids, floor_snapshots, floor_server). Returns: one row
-- (visible_at or NULL, now, then the floors found as fragment floors_found reports them).
WITH RECURSIVE wanted AS (
    SELECT w.kind FROM unnest(%(kinds)s::text[]) AS w (kind)
    WHERE NOT EXISTS (SELECT FROM {kinds} AS k WHERE k.kind = w.kind AND k.paused)
),
{floored_levels}
SELECT (SELECT min(levels.first_at) FROM levels), now(),
       array_agg(tops.kind), array_agg(tops.priority), array_agg(tops.first_at),
       array_agg(tops.first_id), pg_current_snapshot()::text, {floor_server}
FROM tops
