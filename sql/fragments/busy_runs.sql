-- Fragment {busy_runs}: (id, false) for each run of `batch` that {locked_runs} skipped
-- while, as this statement's snapshot saw it, the run still held its job: the caller
-- tries those again. A run missing from both lists was fenced out.
SELECT j.id, false
FROM (SELECT * FROM batch WHERE id NOT IN (SELECT id FROM locked)) AS b
JOIN {jobs} AS j ON j.id = b.id
WHERE {held_by_run}
