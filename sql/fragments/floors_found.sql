-- Fragment {floors_found}: the end of a claim's select list and the rest of it, after
-- `SELECT claimed.*,`: each row of the CTE `claimed`, then one row of NULL job columns
-- with the floors the CTE `tops` found (fragment pending_levels) as arrays by kind and
-- the statement's snapshot as text (once: a busy server's snapshot is long) and the
-- server it ran on (fragment floor_server).
NULL::text[], NULL::int[], NULL::timestamptz[], NULL::uuid[], NULL::text, NULL::text
FROM claimed
UNION ALL
SELECT claimed.*, found.*
FROM (
    SELECT array_agg(tops.kind), array_agg(tops.priority), array_agg(tops.first_at),
           array_agg(tops.first_id), pg_current_snapshot()::text,
           {floor_server}
    FROM tops
) AS found
LEFT JOIN claimed ON false
