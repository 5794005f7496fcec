-- Share-locks the existing parents of jobs about to be enqueued, in id order, and reads
-- their status. A parent finishing meanwhile waits for the enqueue's transaction (and then
-- settles the new children); one that finished first is read as finished.
-- Parameters: ids (uuid[]). Returns: (id, status) of each parent that exists.
SELECT id, status
FROM {jobs}
WHERE id = ANY (%(ids)s::uuid[])
ORDER BY id
FOR SHARE
