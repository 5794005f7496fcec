-- Claims up to %(limit)s due jobs of the given kinds, highest priority first, then the
-- longest visible, stamping owner, lease and the next run epoch.
-- Walking the claim index in its order for "visible_at <= now()" would step over every
-- not-yet-due row of a higher priority first, so `levels` finds each kind's distinct
-- pending priorities by a loose index scan (one probe per priority), and `picked` reads
-- each (kind, priority) range only up to now(): each claim costs a few short index probes
-- at any backlog. SKIP LOCKED inside the range scans lets concurrent claimers pass each other.
-- A fair kind's range is read in tag order instead (fragment fair_candidates), and its
-- jobs take the places of its range's jobs by age (fragment fair_places).
-- A kind that is paused or has limits (its row in {kinds}) is left out here, whatever the
-- caller believes: its claims go through claim_limited.sql, which takes the kind's turn.
-- Parameters: kinds (text[]), leases (float8[] seconds, one per kind), priority_floor,
-- limit, worker. Returns: the claimed jobs (JobRecord.from_row order), unordered.
WITH RECURSIVE {claim_wanted},
{pending_levels},
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
{claim_update}
