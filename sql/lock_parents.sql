-- Locks the existing parents of jobs about to be enqueued, in id order, marks them as
-- having children and reads their status. A parent finishing meanwhile waits for the
-- enqueue's transaction (and then settles the new children, having seen the mark); one
-- that finished first is read as finished.
-- Parameters: ids (uuid[]). Returns: (id, status) of each parent that exists.
WITH locked AS (
    SELECT id
    FROM {jobs}
    WHERE id = ANY (%(ids)s::uuid[])
    ORDER BY id
    FOR NO KEY UPDATE
)
UPDATE {jobs} AS j
SET has_children = true
FROM locked
WHERE j.id = locked.id
RETURNING j.id, j.status
