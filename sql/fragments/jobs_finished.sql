-- Fragment {jobs_finished}: the CTE `finished` of every statement that finishes jobs
-- (completion, dead, cancel), over its CTE `settled` (id, status, has_children, awaited)
-- of the rows it changed and holds locked; rows it left unfinished are ignored. It
-- releases or cancels the waiting children of the jobs that have any, in this
-- transaction, and notifies the channel of finished jobs once when any was awaited: a
-- job nobody waits for and without children costs nothing more. has_children and
-- awaited are read from the rows locked here, so a child's enqueue or a waiter's mark
-- that committed first is seen, and one that comes later waits for this transaction.
-- The caller must read `finished` (a CTE nobody reads is not run).
finished AS (
    SELECT count(*) FROM (
        SELECT {finish_children}(array_agg(s.id), s.status)
        FROM settled AS s
        WHERE s.has_children AND s.status IN ('completed', 'dead', 'cancelled')
        GROUP BY s.status
    ) AS released
    UNION ALL
    SELECT count(*) FROM (
        SELECT pg_notify({done_channel}, '')
        FROM (SELECT FROM settled AS s
              WHERE s.awaited AND s.status IN ('completed', 'dead', 'cancelled')
              LIMIT 1) AS a
    ) AS notified
)
