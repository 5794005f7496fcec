-- Lets go of the prefix's pruning lock taken by this session.
-- Parameters: key. Returns: whether it was held.
SELECT pg_advisory_unlock(%(key)s)
