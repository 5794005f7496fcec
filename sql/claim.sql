-- Claims up to %(limit)s due jobs of the given kinds, highest priority first, then the
-- longest visible, stamping owner, lease and the next run epoch.
-- The claim index is (kind, priority DESC, visible_at, id) WHERE pending. Walking it in
-- that order for "visible_at <= now()" would step over every not-yet-due row of a higher
-- priority first, so `levels` finds each kind's distinct pending priorities by a loose
-- index scan (one probe per priority), and `picked` reads each (kind, priority) range
-- only up to now(): each claim costs a few short index probes at any backlog. SKIP LOCKED
-- inside the range scans lets concurrent claimers pass each other.
-- Parameters: kinds (text[]), leases (float8[] seconds, one per kind), priority_floor,
-- limit, worker. Returns: the claimed jobs (JOB_COLUMNS order), unordered.
WITH RECURSIVE wanted AS (
    SELECT w.kind, w.lease FROM unnest(%(kinds)s::text[], %(leases)s::float8[]) AS w (kind, lease)
),
levels (kind, lease, priority) AS (
    SELECT wanted.kind, wanted.lease, top.priority
    FROM wanted
    CROSS JOIN LATERAL (
        SELECT j.priority FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = wanted.kind
          AND j.priority >= %(priority_floor)s
        ORDER BY j.priority DESC
        LIMIT 1
    ) AS top
    UNION ALL
    SELECT levels.kind, levels.lease, lower.priority
    FROM levels
    CROSS JOIN LATERAL (
        SELECT j.priority FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = levels.kind
          AND j.priority < levels.priority AND j.priority >= %(priority_floor)s
        ORDER BY j.priority DESC
        LIMIT 1
    ) AS lower
),
picked AS (
    SELECT c.id, levels.lease
    FROM levels
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.visible_at
        FROM {jobs} AS j
        WHERE j.status = 'pending'
          AND j.kind = levels.kind
          AND j.priority = levels.priority
          AND j.visible_at <= now()
        ORDER BY j.visible_at, j.id
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
