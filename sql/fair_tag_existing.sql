-- Tags the pending and waiting jobs of kinds that have just turned fair (in this
-- transaction, after fair_jobs_lock.sql), as if they had been enqueued one after another
-- in claim order: fragment fair_tags over them. Jobs already tagged keep their tags.
-- Parameters: kinds (text[]). Returns: nothing.
WITH batch AS MATERIALIZED (
    SELECT row_number() OVER (ORDER BY j.priority DESC, j.visible_at, j.id) AS n,
           j.id, j.kind, j.priority, j.concurrency_key
    FROM {jobs} AS j
    WHERE j.kind = ANY(%(kinds)s::text[]) AND j.status IN ('pending', 'waiting')
      AND j.fair_tag IS NULL
),
{fair_tags}
UPDATE {jobs} AS j
SET fair_tag = tags.tag
FROM tags
WHERE j.id = tags.id
