-- Fragment {claim_wanted}: the CTE `wanted` (kind, lease, fair) of claim.sql and
-- claim_floored.sql: each kind of %(kinds)s with its lease from %(leases)s, unless the
-- database holds it back (paused, or with limits: claim_limited.sql claims those).
wanted AS (
    SELECT w.kind, w.lease, coalesce(k.fair, false) AS fair
    FROM unnest(%(kinds)s::text[], %(leases)s::float8[]) AS w (kind, lease)
    LEFT JOIN {kinds} AS k ON k.kind = w.kind
    WHERE NOT coalesce({kind_held_back}, false)
)
