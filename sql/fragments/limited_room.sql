-- Fragment {limited_room}: the CTE `room` (kind, lease, key_concurrency, fair, places) of
-- each kind asked for
-- in %(kinds)s / %(leases)s that is not paused, with the runs it may start now: at most
-- %(limit)s, its concurrency less its claimed jobs, and its rate less the runs started in
-- the rate's window (a limit that is NULL limits nothing: least() skips it). Read after
-- the kinds' rows were locked (claim_limited_lock.sql), so the counts are current.
room AS (
    SELECT w.kind, w.lease, k.key_concurrency, coalesce(k.fair, false) AS fair,
           least(
               %(limit)s,
               k.concurrency - (
                   SELECT count(*) FROM {jobs} AS r
                   WHERE r.status = 'claimed' AND r.kind = w.kind),
               k.rate_limit - (
                   SELECT count(*) FROM unnest(k.rate_starts) AS s (at)
                   WHERE s.at > statement_timestamp() - make_interval(secs => k.rate_window))
           ) AS places
    FROM unnest(%(kinds)s::text[], %(leases)s::float8[]) AS w (kind, lease)
    LEFT JOIN {kinds} AS k ON k.kind = w.kind
    WHERE NOT coalesce(k.paused, false)
)
