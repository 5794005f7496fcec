-- Extends the leases of running jobs still held by their run; the heartbeat's one query.
-- Parameters: ids (uuid[]), owners (text[]), runs (int[]), leases (float8[] seconds).
-- Returns: the ids still held (a missing id lost its lease or was cancelled).
UPDATE {jobs} AS j
SET claim_expires_at = now() + make_interval(secs => b.lease)
FROM unnest(%(ids)s::uuid[], %(owners)s::text[], %(runs)s::integer[], %(leases)s::float8[])
    AS b (id, owner, run, lease)
WHERE j.id = b.id AND j.claimed_by = b.owner AND j.run_count = b.run
  AND j.status = 'claimed'
RETURNING j.id
