-- Reads every job of one workflow, in enqueue order, with its parents.
-- Parameters: id (the workflow id). Returns: the job in JobRecord.from_row order, then
-- its parents' ids (uuid[]).
SELECT {job_columns},
       ARRAY(SELECT d.parent_id FROM {deps} AS d WHERE d.child_id = j.id ORDER BY d.parent_id)
FROM {jobs} AS j
WHERE workflow_id = %(id)s
ORDER BY id
