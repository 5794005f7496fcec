-- Fragment {limited_claimed}: from the CTE `candidates` (id, kind, priority, visible_at,
-- fair_tag) and `room`, the CTEs that claim each kind's best candidates up to its places (and
-- %(limit)s in all, a fair kind's in tag order: fragment fair_places) for %(worker)s, and
-- record them as the rate's starts at statement_timestamp(): after the kinds' locks, so
-- successive turns never go back in time.
ranked AS (
    SELECT candidates.*,
           row_number() OVER (
               PARTITION BY candidates.kind
               ORDER BY candidates.priority DESC, candidates.fair_tag, candidates.visible_at,
                        candidates.id
           ) AS nth
    FROM candidates
),
placeable AS (
    SELECT ranked.id, ranked.kind, ranked.priority, ranked.visible_at, ranked.fair_tag,
           room.lease
    FROM ranked
    JOIN room ON room.kind = ranked.kind
    WHERE ranked.nth <= room.places
),
{fair_places},
picked AS (
    SELECT placed.id AS picked_id, placed.lease
    FROM placed
    ORDER BY placed.priority DESC, placed.place_at, placed.place_id
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
