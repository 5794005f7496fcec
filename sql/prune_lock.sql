-- Takes the prefix's pruning lock for this session if no other session holds it: one
-- pruner at a time, and a pruner that dies lets go with its connection.
-- Parameters: key. Returns: whether the lock was taken.
SELECT pg_try_advisory_lock(%(key)s)
