-- Row-locks, in id order, the cancelled descendants of a requeued job (cancelled children,
-- their cancelled children, ...) and every parent of theirs, so no parent finishes while
-- requeue_descendants counts what each child still waits for.
-- Parameters: id (the requeued job). Returns: the locked ids.
WITH RECURSIVE {cancelled_descendants}
SELECT j.id
FROM {jobs} AS j
WHERE j.id IN (SELECT id FROM tree)
   OR j.id IN (SELECT d.parent_id FROM {deps} AS d WHERE d.child_id IN (SELECT id FROM tree))
ORDER BY j.id
FOR UPDATE OF j
