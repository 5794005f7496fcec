-- Inserts jobs with parents (and any parents inserted with them, listed first) in one
-- statement: each job with the status its parents give it (waiting, pending, or cancelled
-- when a parent already failed), its parent edges (open while the parent is unfinished),
-- a journal row for each cancelled one, and one notification per kind made pending (none
-- on the channel of finished jobs: a job not yet stored has no waiter). Runs after
-- lock_parents in the same transaction. Arrays travel in binary ("b" placeholders).
-- Parameters: ids, kinds, payloads (JSON text), priorities, delays (s), ats, max_attempts,
-- concurrency_keys, trace_contexts, statuses, parents_left, on_parent_failures (NULL or
-- 'run'), notes (the cancellation note or NULL), has_children (a later job of the batch
-- names it), workflow_id (nullable); the edges as
-- edge_parents, edge_children, edge_open. Jobs of a fair kind are tagged when written
-- (fragment fair_tags), waiting ones too: a child takes its turn from its enqueue.
-- Returns: the number of jobs inserted.
WITH batch AS MATERIALIZED (
    SELECT *
    FROM unnest(%(ids)b::uuid[], %(kinds)b::text[], %(payloads)b::jsonb[],
                %(priorities)b::smallint[], %(delays)b::float8[], %(ats)b::timestamptz[],
                %(max_attempts)b::integer[], %(concurrency_keys)b::text[],
                %(trace_contexts)b::jsonb[], %(statuses)b::text[], %(parents_left)b::integer[],
                %(on_parent_failures)b::text[], %(has_children)b::boolean[])
         WITH ORDINALITY
         AS j (id, kind, payload, priority, delay, at, max_attempts, concurrency_key,
               trace_context, status, parents_left, on_parent_failure, has_children, n)
),
{fair_tags},
inserted AS (
    INSERT INTO {jobs} (id, kind, payload, priority, visible_at, max_attempts, concurrency_key,
                        trace_context, status, finished_at, parents_left, on_parent_failure,
                        has_children, workflow_id, fair_tag)
    SELECT j.id, j.kind, j.payload, j.priority,
           coalesce(j.at, now() + make_interval(secs => coalesce(j.delay, 0))),
           j.max_attempts, j.concurrency_key, j.trace_context, j.status,
           CASE WHEN j.status = 'cancelled' THEN now() END, j.parents_left,
           j.on_parent_failure, j.has_children, %(workflow_id)s::uuid, tags.tag
    FROM batch AS j
    LEFT JOIN tags ON tags.n = j.n
    RETURNING id, kind, run_count, status
),
edges AS (
    INSERT INTO {deps} (parent_id, child_id, open)
    SELECT * FROM unnest(%(edge_parents)b::uuid[], %(edge_children)b::uuid[],
                         %(edge_open)b::boolean[])
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note)
    SELECT i.id, i.kind, i.run_count, 'cancelled', n.note
    FROM inserted AS i
    JOIN unnest(%(ids)b::uuid[], %(notes)b::text[]) AS n (id, note) ON n.id = i.id
    WHERE i.status = 'cancelled'
),
woken AS (
    SELECT pg_notify({channel}, k.kind)
    FROM (SELECT DISTINCT kind FROM inserted WHERE status = 'pending') AS k
)
SELECT count(*) FROM inserted CROSS JOIN (SELECT count(*) FROM woken) AS w
