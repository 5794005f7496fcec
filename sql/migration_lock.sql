-- Bounds the lock wait, then takes the prefix's migration lock until the transaction ends.
-- Parameters: timeout (text such as '30000ms'), key (bigint, a stable hash of the prefix).
-- Returns: one row; a LockNotAvailable error when the wait exceeds the timeout.
SELECT set_config('lock_timeout', %(timeout)s, true), pg_advisory_xact_lock(%(key)s::bigint)
