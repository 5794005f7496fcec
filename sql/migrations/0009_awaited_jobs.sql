-- Waiting costs those who do not wait nothing: a waiter marks its job awaited, and only
-- a transaction that finishes an awaited job notifies the channel of finished jobs (a
-- NOTIFY takes a cluster-wide lock at commit, serializing every committer that sent one).
-- The waiter sets the mark under the job's row lock, after its LISTEN, and reads the job
-- afterwards: a finishing statement locks the row too, so either it sees the mark (and
-- notifies) or the waiter's read sees the job finished. The mark is never cleared: a job
-- once awaited notifies each time it finishes. A constant default: adding it rewrites
-- nothing.
ALTER TABLE {jobs} ADD COLUMN awaited boolean NOT NULL DEFAULT false;

-- As in 0007, with two savings: a cancelled child's own children are looked for only
-- when it has any (has_children, read from the row this function locked), and the
-- channel of finished jobs is notified only when an awaited child was cancelled.
CREATE OR REPLACE FUNCTION {finish_children}(parents uuid[], outcome text) RETURNS integer
    LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
    finished uuid[] := parents;
    ended text := outcome;
    cancelled uuid[];
    awaited_cancelled boolean;
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
            RETURNING j.id, j.kind, j.run_count, j.status, l.parent, j.has_children, j.awaited
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
        SELECT count(*)::integer,
               array_agg(u.id) FILTER (WHERE u.status = 'cancelled' AND u.has_children),
               coalesce(bool_or(u.status = 'cancelled' AND u.awaited), false)
        INTO changed, cancelled, awaited_cancelled
        FROM updated AS u CROSS JOIN (SELECT count(*) FROM woken) AS w;
        total := total + changed;
        finished := coalesce(cancelled, '{{}}');
        ended := 'cancelled';
        IF awaited_cancelled THEN
            PERFORM pg_notify({done_channel}, '');
        END IF;
    END LOOP;
    RETURN total;
END
$body$;
