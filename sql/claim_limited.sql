-- Claims up to %(limit)s due jobs of kinds with limits, within each kind's room: its
-- concurrency less its claimed jobs, its rate less the runs started in the rate's window,
-- and per concurrency key its key_concurrency less the key's claimed jobs. Runs after
-- claim_limited_lock.sql in the same transaction (the kinds' rows stay locked), and
-- records the claims as rate starts at statement_timestamp(): after the lock, so the
-- starts of successive turns never go back in time.
-- Unkeyed kinds are read like claim.sql (a loose index scan over priorities). Keyed kinds
-- walk their distinct pending keys by a loose index scan of the key index and read each
-- key's first jobs up to its free places: a busy key's backlog is never read, so it
-- blocks no other key. A keyed kind's jobs without a key are read past the keyed ones.
-- Parameters: kinds (text[]), leases (float8[]), priority_floor, limit, worker.
-- Returns: the claimed jobs (JobRecord.from_row order), unordered.
WITH RECURSIVE asked AS (
    SELECT w.kind, w.lease, k.concurrency, k.key_concurrency, k.rate_limit, k.rate_window,
           coalesce(k.rate_starts, '{{}}') AS rate_starts
    FROM unnest(%(kinds)s::text[], %(leases)s::float8[]) AS w (kind, lease)
    LEFT JOIN {kinds} AS k ON k.kind = w.kind
    WHERE NOT coalesce(k.paused, false)
),
room AS (
    SELECT asked.kind, asked.lease, asked.key_concurrency,
           least(
               %(limit)s,
               asked.concurrency - (
                   SELECT count(*) FROM {jobs} AS r
                   WHERE r.status = 'claimed' AND r.kind = asked.kind),
               asked.rate_limit - (
                   SELECT count(*) FROM unnest(asked.rate_starts) AS s (at)
                   WHERE s.at > statement_timestamp() - make_interval(secs => asked.rate_window))
           ) AS places
    FROM asked
),
wanted AS (
    SELECT room.kind, room.places FROM room
    WHERE room.places > 0 AND room.key_concurrency IS NULL
),
keyed AS (
    SELECT room.kind, room.places, room.key_concurrency FROM room
    WHERE room.places > 0 AND room.key_concurrency IS NOT NULL
),
{pending_levels},
keys (kind, key) AS (
    SELECT keyed.kind, first.concurrency_key
    FROM keyed
    CROSS JOIN LATERAL (
        SELECT j.concurrency_key FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.concurrency_key IS NOT NULL AND j.kind = keyed.kind
        ORDER BY j.concurrency_key
        LIMIT 1
    ) AS first
    UNION ALL
    SELECT keys.kind, later.concurrency_key
    FROM keys
    CROSS JOIN LATERAL (
        SELECT j.concurrency_key FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.concurrency_key IS NOT NULL AND j.kind = keys.kind
          AND j.concurrency_key > keys.key
        ORDER BY j.concurrency_key
        LIMIT 1
    ) AS later
),
candidates AS (
    SELECT c.id, c.kind, c.priority, c.visible_at
    FROM levels
    JOIN wanted ON wanted.kind = levels.kind
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.priority, j.visible_at
        FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = levels.kind AND j.priority = levels.priority
          AND j.visible_at <= now()
        ORDER BY j.visible_at, j.id
        LIMIT wanted.places
        FOR UPDATE SKIP LOCKED
    ) AS c
    UNION ALL
    SELECT c.id, c.kind, c.priority, c.visible_at
    FROM keys
    JOIN keyed ON keyed.kind = keys.kind
    CROSS JOIN LATERAL (
        SELECT keyed.key_concurrency - count(*) AS free FROM {jobs} AS r
        WHERE r.status = 'claimed' AND r.concurrency_key IS NOT NULL
          AND r.kind = keys.kind AND r.concurrency_key = keys.key
    ) AS busy
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.priority, j.visible_at
        FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.concurrency_key IS NOT NULL
          AND j.kind = keys.kind AND j.concurrency_key = keys.key
          AND j.visible_at <= now() AND j.priority >= %(priority_floor)s
        ORDER BY j.priority DESC, j.visible_at, j.id
        LIMIT least(greatest(busy.free, 0), keyed.places)
        FOR UPDATE SKIP LOCKED
    ) AS c
    UNION ALL
    SELECT c.id, c.kind, c.priority, c.visible_at
    FROM keyed
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.priority, j.visible_at
        FROM {jobs} AS j
        WHERE j.status = 'pending' AND j.kind = keyed.kind AND j.concurrency_key IS NULL
          AND j.visible_at <= now() AND j.priority >= %(priority_floor)s
        ORDER BY j.priority DESC, j.visible_at, j.id
        LIMIT keyed.places
        FOR UPDATE SKIP LOCKED
    ) AS c
),
ranked AS (
    SELECT candidates.*,
           row_number() OVER (
               PARTITION BY candidates.kind
               ORDER BY candidates.priority DESC, candidates.visible_at, candidates.id
           ) AS nth
    FROM candidates
),
picked AS (
    SELECT ranked.id AS picked_id, room.lease
    FROM ranked
    JOIN room ON room.kind = ranked.kind
    WHERE ranked.nth <= room.places
    ORDER BY ranked.priority DESC, ranked.visible_at, ranked.id
    LIMIT %(limit)s
),
claimed AS (
    UPDATE {jobs} AS j
    SET status = 'claimed',
        claimed_by = %(worker)s,
        run_count = j.run_count + 1,
        claim_expires_at = statement_timestamp() + make_interval(secs => picked.lease)
    FROM picked
    WHERE j.id = picked.picked_id
    RETURNING {job_columns}
),
stamped AS (
    UPDATE {kinds} AS k
    SET rate_starts = ARRAY(
            SELECT s.at FROM unnest(k.rate_starts) AS s (at)
            WHERE s.at > statement_timestamp() - make_interval(secs => k.rate_window)
            ORDER BY s.at
        ) || array_fill(statement_timestamp(), ARRAY[started.runs::integer])
    FROM (SELECT claimed.kind, count(*) AS runs FROM claimed GROUP BY claimed.kind) AS started
    WHERE k.kind = started.kind AND k.rate_limit IS NOT NULL
)
SELECT * FROM claimed
