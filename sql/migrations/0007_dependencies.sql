-- Job dependencies: a job with parents waits (status 'waiting', outside the claim index,
-- which covers pending rows only) until every parent has finished. parents_left counts
-- its parents not finished yet; the transaction that finishes a parent decrements it
-- under the child's row lock, so concurrent parents release a child exactly once.
-- on_parent_failure: NULL cancels the child when a parent ends dead or cancelled,
-- 'run' counts that parent as finished. workflow_id groups the jobs of one graph.
-- has_children: set (under the parent's row lock) by the enqueue of a child, so that
-- settling a job without children never looks for any.
-- Constant defaults and nullable columns: adding them rewrites nothing.
ALTER TABLE {jobs} ADD COLUMN parents_left integer NOT NULL DEFAULT 0;
ALTER TABLE {jobs} ADD COLUMN has_children boolean NOT NULL DEFAULT false;
ALTER TABLE {jobs} ADD COLUMN on_parent_failure text;
ALTER TABLE {jobs} ADD COLUMN workflow_id uuid;

ALTER TABLE {jobs} DROP CONSTRAINT {jobs_status_check};
ALTER TABLE {jobs} ADD CONSTRAINT {jobs_status_check} CHECK (
    status IN ('pending', 'claimed', 'completed', 'dead', 'cancelled', 'waiting')
    AND (finished_at IS NOT NULL) = (status IN ('completed', 'dead', 'cancelled'))
    AND (on_parent_failure IS NULL OR on_parent_failure = 'run')
);

CREATE INDEX {workflow_idx} ON {jobs} (workflow_id) WHERE workflow_id IS NOT NULL;

-- One row per parent -> child edge. open: the child still waits for this parent (closed
-- once, when the parent first finishes, so a requeued parent never counts twice).
-- The primary key leads with the parent: releasing a finished parent's children is an
-- index probe. The child index serves a child reading its parents' results.
CREATE TABLE {deps} (
    parent_id uuid    NOT NULL,
    child_id  uuid    NOT NULL,
    open      boolean NOT NULL DEFAULT true,
    CONSTRAINT {deps_pkey} PRIMARY KEY (parent_id, child_id),
    CONSTRAINT {deps_parent_fkey} FOREIGN KEY (parent_id) REFERENCES {jobs} (id)
        ON DELETE CASCADE,
    CONSTRAINT {deps_child_fkey} FOREIGN KEY (child_id) REFERENCES {jobs} (id)
        ON DELETE CASCADE
);

CREATE INDEX {deps_child_idx} ON {deps} (child_id);

-- Called by every statement that finishes jobs (completion, dead, cancel), inside its
-- transaction and after it locked and changed the parents' rows: closes the parents'
-- open edges and settles their waiting children. A child is released (pending) once its
-- last parent completed; when a parent ended dead or cancelled it is cancelled, with a
-- journal note naming that parent, unless on_parent_failure is 'run' (then released the
-- same way), and the cancellation carries on to its own children.
-- VOLATILE, so each statement here reads a fresh snapshot: an edge whose enqueue
-- committed after the calling statement began is seen (the enqueue locks and updates
-- the parent's row, so it commits before the finishing statement locks it, or waits for
-- it and then sees the parent finished). Children are locked in id order.
-- Returns the number of children changed.
CREATE FUNCTION {finish_children}(parents uuid[], outcome text) RETURNS integer
    LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
    finished uuid[] := parents;
    ended text := outcome;
    cancelled uuid[];
    changed integer;
    total integer := 0;
BEGIN
    WHILE cardinality(finished) > 0 LOOP
        WITH closed AS (
            UPDATE {deps} AS d SET open = false
            WHERE d.parent_id = ANY (finished) AND d.open
            RETURNING d.parent_id, d.child_id
        ),
        per_child AS (
            SELECT c.child_id AS id, count(*)::integer AS n,
                   (array_agg(c.parent_id ORDER BY c.parent_id))[1] AS parent
            FROM closed AS c
            GROUP BY c.child_id
        ),
        locked AS (
            SELECT j.id, p.n, p.parent,
                   ended <> 'completed' AND j.on_parent_failure IS NULL AS cancel
            FROM {jobs} AS j JOIN per_child AS p ON p.id = j.id
            WHERE j.status = 'waiting'
            ORDER BY j.id
            FOR UPDATE OF j
        ),
        updated AS (
            UPDATE {jobs} AS j
            SET parents_left = j.parents_left - l.n,
                status = CASE WHEN l.cancel THEN 'cancelled'
                              WHEN j.parents_left - l.n <= 0 THEN 'pending'
                              ELSE 'waiting' END,
                finished_at = CASE WHEN l.cancel THEN now() END,
                visible_at = CASE WHEN NOT l.cancel AND j.parents_left - l.n <= 0
                                  THEN greatest(j.visible_at, now()) ELSE j.visible_at END
            FROM locked AS l
            WHERE j.id = l.id AND j.status = 'waiting'
            RETURNING j.id, j.kind, j.run_count, j.status, l.parent
        ),
        journaled AS (
            INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
            SELECT u.id, u.kind, u.run_count, 'cancelled',
                   'parent ' || p.ulid || ' ended ' || ended
            FROM updated AS u
            CROSS JOIN LATERAL (
                -- The parent's id as a ULID (Crockford base32 of its 128 bits), as users see it.
                SELECT string_agg(
                           substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ',
                                  substring(b.bits FROM i * 5 + 1 FOR 5)::integer + 1, 1),
                           '' ORDER BY i) AS ulid
                FROM (SELECT B'00' || ('x' || replace(u.parent::text, '-', ''))::bit(128)
                             AS bits) AS b,
                     generate_series(0, 25) AS i
            ) AS p
            WHERE u.status = 'cancelled'
        ),
        woken AS (
            SELECT pg_notify({channel}, k.kind)
            FROM (SELECT DISTINCT kind FROM updated WHERE status = 'pending') AS k
        )
        SELECT count(*)::integer, array_agg(u.id) FILTER (WHERE u.status = 'cancelled')
        INTO changed, cancelled
        FROM updated AS u CROSS JOIN (SELECT count(*) FROM woken) AS w;
        total := total + changed;
        finished := coalesce(cancelled, '{{}}');
        ended := 'cancelled';
        IF cardinality(finished) > 0 THEN
            PERFORM pg_notify({done_channel}, '');
        END IF;
    END LOOP;
    RETURN total;
END
$body$;
