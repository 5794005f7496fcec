-- Sends a notification on the prefix's channel (the listener's self-probe).
-- Parameters: payload. Returns: nothing useful.
SELECT pg_notify({channel}, %(payload)s)
