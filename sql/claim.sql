-- Claims up to %(limit)s due jobs of the given kinds, highest priority first, then the
-- longest visible, stamping owner, lease and the next run epoch.
-- A LATERAL scan per kind keeps each lookup an ordered index scan on the claim index
-- (kind, priority DESC, visible_at, id), however many rows of other kinds or future
-- visibility are pending; SKIP LOCKED inside it lets concurrent claimers pass each other.
-- Parameters: kinds (text[]), leases (float8[] seconds, one per kind), priority_floor,
-- limit, worker. Returns: the claimed jobs (JOB_COLUMNS order), unordered.
WITH wanted AS (
    SELECT w.kind, w.lease FROM unnest(%(kinds)s::text[], %(leases)s::float8[]) AS w (kind, lease)
),
picked AS (
    SELECT c.id, wanted.lease
    FROM wanted
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.visible_at
        FROM {jobs} AS j
        WHERE j.status = 'pending'
          AND j.kind = wanted.kind
          AND j.priority >= %(priority_floor)s
          AND j.visible_at <= now()
        ORDER BY j.priority DESC, j.visible_at, j.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS c
    ORDER BY c.priority DESC, c.visible_at, c.id
    LIMIT %(limit)s
)
UPDATE {jobs} AS j
SET status = 'claimed',
    claimed_by = %(worker)s,
    run_count = j.run_count + 1,
    claim_expires_at = now() + make_interval(secs => picked.lease)
FROM picked
WHERE j.id = picked.id
RETURNING j.id, j.kind, j.payload, j.priority, j.status, j.created_at, j.visible_at,
          j.run_count, j.failure_count, j.max_attempts, j.carry, j.dedup_key,
          j.claimed_by, j.claim_expires_at, j.finished_at
